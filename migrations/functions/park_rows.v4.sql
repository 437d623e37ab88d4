-- park_rows: park the given queued tasks whose pool is full, and the rows
-- right after them in claim order whose pool is full, unless the pool had
-- room in the last second.
--
-- A claim passes the rows it walked past because their pool was full. Their
-- pools are locked first (FOR UPDATE SKIP LOCKED, and only those still full
-- under the lock), so no release can free a slot before this transaction
-- ends: a task is never parked in a pool with room. Rows busy elsewhere are
-- skipped, as are pools another transaction holds; a later claim parks them.
-- Nothing here waits. The locked pools join the caller's held list.
--
-- Version 4 (migration 0034): the tasks of a pool that had room in the last
-- second (freed_at, set by mark_pool_freed) are not parked. Such a pool
-- fills and frees over and over, and each time it frees, unpark_tasks puts
-- back every task the claims parked meanwhile: with one pool of limit 2
-- holding half of 100,000 tasks, 8 consumers ran at 0.40 of a naive loop,
-- each release unparking about 70 ms of rows while it held the pool's row.
-- The claims walk past those tasks instead, as the naive query does, and a
-- pool that stays full is parked as before, a second after its last free
-- slot at most.
--
-- Version 3 (migration 0031): the rows ahead are parked too. With them go
-- the next c_ahead (64) claimable rows of the same queue and priority as the
-- passed row with the largest id, those past it: they come next in claim
-- order whichever way the claim runs, (priority, id) or (priority DESC, id),
-- over one queue, a list or every queue. Where most tasks wait in full pools
-- (200,000 tasks over 2,000 pools, 90% of the tasks in full ones, 8
-- consumers), every claim walked past about 9 such rows and parked them, two
-- statements and a lock per pool for those 9, and the next claim found the
-- same mix at the head. A call now clears a stretch, and the claims after it
-- find a head with fewer rows to pass over. Rows of another priority are not
-- read, so a claim never parks what lies behind it in its own order. The
-- pools are looked up by name from the rows' own list (= ANY of an array),
-- so the plan reads one pool row per name whatever the pools table holds.
--
-- Version 2 (migration 0026): the row is tested with state = 'queued'
-- COLLATE "C", so the planner cannot use a claim index (whose predicate says
-- state = 'queued') for a lookup by id; see claim_tasks.v19.
CREATE OR REPLACE FUNCTION park_rows(p_ids bigint[], INOUT locked text[])
LANGUAGE plpgsql
SET search_path FROM CURRENT
AS $fn$
DECLARE
    c_ahead CONSTANT integer := 64;
    c_quiet CONSTANT interval := '1 second';  -- a pool freed more recently is not parked
    v_last record;
    v_ids bigint[];
    v_full text[];
BEGIN
    SELECT t.queue, t.priority, t.id INTO v_last
      FROM tasks t
     WHERE t.id = ANY (p_ids)
     ORDER BY t.id DESC
     LIMIT 1;
    IF v_last.id IS NULL THEN
        RETURN;
    END IF;
    -- The rows read are bounded (c_ahead), not the rows kept: a stretch of
    -- tasks with no pool costs the same read and parks nothing.
    v_ids := p_ids || ARRAY(SELECT a.id
                              FROM (SELECT t.id, t.pool FROM tasks t
                                     WHERE t.state = 'queued' AND NOT t.parked AND t.queue = v_last.queue
                                       AND t.priority = v_last.priority AND t.id > v_last.id
                                     ORDER BY t.priority, t.id
                                     LIMIT c_ahead) a
                             WHERE a.pool IS NOT NULL);
    SELECT array_agg(f.name) INTO v_full
      FROM (SELECT p.name FROM pools p
             WHERE p.name = ANY (ARRAY(SELECT DISTINCT t.pool FROM tasks t
                                        WHERE t.id = ANY (v_ids) AND t.pool IS NOT NULL))
               AND p.running_limit IS NOT NULL AND p.running >= p.running_limit
               AND (p.freed_at IS NULL OR p.freed_at < now() - c_quiet)
             ORDER BY p.name
             FOR UPDATE SKIP LOCKED) f;
    IF v_full IS NULL THEN
        RETURN;
    END IF;
    UPDATE tasks SET parked = true
     WHERE id IN (SELECT t.id FROM tasks t
                   WHERE t.id = ANY (v_ids) AND t.pool = ANY (v_full) AND t.state = 'queued' COLLATE "C" AND NOT t.parked
                   FOR UPDATE SKIP LOCKED);
    locked := locked || ARRAY(SELECT f.name FROM unnest(v_full) AS f(name) WHERE f.name <> ALL (locked));
END
$fn$;
