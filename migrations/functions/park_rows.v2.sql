-- park_rows: park the given queued tasks whose pool is full.
--
-- Version 2 (migration 0026): the row is tested with state = 'queued'
-- COLLATE "C", so the planner cannot use a claim index (whose predicate says
-- state = 'queued') for a lookup by id; see claim_tasks.v19.
--
-- A claim passes the rows it walked past because their pool was full. Their
-- pools are locked first (FOR UPDATE SKIP LOCKED, and only those still full
-- under the lock), so no release can free a slot before this transaction
-- ends: a task is never parked in a pool with room. Rows busy elsewhere are
-- skipped, as are pools another transaction holds; a later claim parks them.
-- Nothing here waits. The locked pools join the caller's held list.
CREATE OR REPLACE FUNCTION park_rows(p_ids bigint[], INOUT locked text[])
LANGUAGE plpgsql
SET search_path FROM CURRENT
AS $fn$
DECLARE
    v_full text[];
BEGIN
    SELECT array_agg(f.name) INTO v_full
      FROM (SELECT p.name FROM pools p
             WHERE p.name IN (SELECT t.pool FROM tasks t WHERE t.id = ANY (p_ids))
               AND p.running_limit IS NOT NULL AND p.running >= p.running_limit
             ORDER BY p.name
             FOR UPDATE SKIP LOCKED) f;
    IF v_full IS NULL THEN
        RETURN;
    END IF;
    UPDATE tasks SET parked = true
     WHERE id IN (SELECT t.id FROM tasks t
                   WHERE t.id = ANY (p_ids) AND t.pool = ANY (v_full) AND t.state = 'queued' COLLATE "C" AND NOT t.parked
                   FOR UPDATE SKIP LOCKED);
    locked := locked || ARRAY(SELECT f.name FROM unnest(v_full) AS f(name) WHERE f.name <> ALL (locked));
END
$fn$;
