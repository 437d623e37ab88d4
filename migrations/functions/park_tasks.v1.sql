-- park_tasks: park the tasks of full pools among the first rows of one level.
--
-- Called when a claim found such tasks ahead of what it can take. Looks at
-- the first 500 queued rows of (queue, priority, required), past the first
-- takeable one too, so that one call clears a stretch of the level and the
-- claims after it walk nothing. Those rows' pools that are full are locked
-- (FOR UPDATE, so that no release can free a slot before this transaction
-- ends: a task is never parked in a pool with room), then their rows are
-- parked. Nothing here waits: pools and tasks busy elsewhere are skipped and
-- looked at again by a later claim. The locked pools join the caller's held
-- list, so the claim never waits after this.
CREATE OR REPLACE FUNCTION park_tasks(p_queue text, p_priority integer, p_required integer, INOUT locked text[])
LANGUAGE plpgsql
SET search_path FROM CURRENT
SET plan_cache_mode = force_generic_plan
AS $fn$
DECLARE
    v_ids bigint[];
    v_pools text[];
    v_full text[];
BEGIN
    SELECT array_agg(s.id), array_agg(DISTINCT s.pool) FILTER (WHERE s.pool IS NOT NULL)
      INTO v_ids, v_pools
      FROM (SELECT t.id, t.pool FROM tasks t
             WHERE t.state = 'queued' AND NOT t.parked AND t.queue = p_queue AND t.priority = p_priority
               AND t.required >= p_required AND t.required <= p_required
             ORDER BY t.queue, t.priority, t.required, t.id LIMIT 500) s;
    IF v_pools IS NULL THEN
        RETURN;
    END IF;
    SELECT array_agg(f.name) INTO v_full
      FROM (SELECT p.name FROM pools p
             WHERE p.name = ANY (v_pools) AND p.running_limit IS NOT NULL AND p.running >= p.running_limit
             ORDER BY p.name
             FOR UPDATE SKIP LOCKED) f;
    IF v_full IS NULL THEN
        RETURN;
    END IF;
    UPDATE tasks SET parked = true
     WHERE id IN (SELECT t.id FROM tasks t
                   WHERE t.id = ANY (v_ids) AND t.pool = ANY (v_full) AND t.state = 'queued' AND NOT t.parked
                   FOR UPDATE SKIP LOCKED);
    locked := locked || ARRAY(SELECT f.name FROM unnest(v_full) AS f(name) WHERE f.name <> ALL (locked));
END
$fn$;
