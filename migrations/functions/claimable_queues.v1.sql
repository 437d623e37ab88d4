-- claimable_queues: the queues that have claimable (queued, unparked) work,
-- in name order, after p_after (NULL: from the first), at most p_limit of
-- them (NULL: all).
--
-- A loose scan of ix_tasks_claim (queue, priority, id): one probe per queue,
-- however many tasks each holds. claim_tasks (version 9) lists a few queues
-- first, to learn whether a claim over every queue spans one queue or many,
-- and the rest only if it must ask the per-queue fit buckets; waiting_heads
-- (version 2) lists them all. One copy of the scan, where there were three.
--
-- The start is two branches, one per case, each an index bound: a single
-- condition "p_after IS NULL OR queue > p_after" is a filter in a generic
-- plan, and would walk every row of the queues before p_after.
CREATE OR REPLACE FUNCTION claimable_queues(p_after text, p_limit integer)
RETURNS text[]
LANGUAGE plpgsql
STABLE
SET search_path FROM CURRENT
SET plan_cache_mode = force_generic_plan
SET enable_seqscan = off
SET jit = off
AS $fn$
DECLARE
    v_queues text[];
BEGIN
    IF p_limit IS NOT NULL AND p_limit < 1 THEN
        RETURN NULL;
    END IF;
    WITH RECURSIVE q(name, n) AS (
        SELECT (SELECT s.queue
                  FROM ((SELECT t.queue FROM tasks t
                          WHERE t.state = 'queued' AND NOT t.parked AND p_after IS NULL
                          ORDER BY t.queue LIMIT 1)
                        UNION ALL
                        (SELECT t.queue FROM tasks t
                          WHERE t.state = 'queued' AND NOT t.parked AND t.queue > p_after
                          ORDER BY t.queue LIMIT 1)) s
                 LIMIT 1), 1
        UNION ALL
        SELECT (SELECT t.queue FROM tasks t
                 WHERE t.state = 'queued' AND NOT t.parked AND t.queue > q.name
                 ORDER BY t.queue LIMIT 1), q.n + 1
          FROM q
         WHERE q.name IS NOT NULL AND (p_limit IS NULL OR q.n < p_limit)
    )
    SELECT array_agg(q.name ORDER BY q.n) INTO v_queues FROM q WHERE q.name IS NOT NULL;
    RETURN v_queues;
END
$fn$;
