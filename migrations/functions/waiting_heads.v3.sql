-- waiting_heads: the first p_limit claimable tasks in claim order, for the scheduling policies.
--
-- The claim (claim_tasks) walks queued, unparked tasks by (priority, id), or
-- (priority descending, id) when p_descending, taking each one that fits. A
-- worker that holds capacity back for a large task must know that order to
-- choose the claim budget that takes exactly what it planned, so this returns
-- the same order, skipping tasks of full pools as the claim does.
--
-- Cost does not grow with the backlog: each queue's prefix of claim order is
-- read from ix_tasks_claim (queue, priority, id), at most p_limit rows each,
-- and merged. Descending, a queue's priorities are visited one by one from the
-- top (a loose scan), each in id order, until p_limit rows are found.
-- Read-only and lock-free: a plan is advice; the claim decides.
-- Version 2: the queues are listed by claimable_queues, the one copy of that
-- loose scan.
-- Version 3: queue and estimate are cast to the declared text and double
-- precision, since the columns became domains (migration 0017) and RETURN
-- QUERY wants the declared types exactly.
CREATE OR REPLACE FUNCTION waiting_heads(p_queues text[], p_limit integer, p_descending boolean)
RETURNS TABLE (id bigint, queue text, priority integer, required integer, estimate double precision)
LANGUAGE plpgsql
STABLE
SET search_path FROM CURRENT
AS $fn$
DECLARE
    v_queues text[];
    v_queue text;
    v_prio integer;
    v_ids bigint[] := '{}';
    v_start integer;
    v_n integer;
BEGIN
    IF p_limit IS NULL OR p_limit < 1 THEN
        RETURN;
    END IF;
    IF p_queues IS NULL THEN
        v_queues := claimable_queues(NULL, NULL);
    ELSE
        v_queues := p_queues;
    END IF;
    IF v_queues IS NULL THEN
        RETURN;
    END IF;

    IF NOT p_descending THEN
        RETURN QUERY
        SELECT c.id, c.queue::text, c.priority, c.required, c.estimate::double precision
          FROM unnest(v_queues) AS q(name)
         CROSS JOIN LATERAL (
               SELECT t.id, t.queue, t.priority, t.required, t.estimate FROM tasks t
                WHERE t.state = 'queued' AND NOT t.parked AND t.queue = q.name
                  AND (t.pool IS NULL OR NOT EXISTS (SELECT 1 FROM pools p
                                                      WHERE p.name = t.pool
                                                        AND p.running_limit IS NOT NULL
                                                        AND p.running >= p.running_limit))
                ORDER BY t.queue, t.priority, t.id LIMIT p_limit) c
         ORDER BY c.priority, c.id
         LIMIT p_limit;
        RETURN;
    END IF;

    -- Descending: per queue, priorities from the top, each in id order.
    FOREACH v_queue IN ARRAY v_queues LOOP
        v_start := cardinality(v_ids);
        v_n := 0;
        v_prio := NULL;
        LOOP
            SELECT t.priority INTO v_prio FROM tasks t
             WHERE t.state = 'queued' AND NOT t.parked AND t.queue = v_queue
               AND (v_prio IS NULL OR t.priority < v_prio)
             ORDER BY t.queue DESC, t.priority DESC LIMIT 1;
            EXIT WHEN NOT FOUND;
            v_ids := v_ids || ARRAY(
                SELECT t.id FROM tasks t
                 WHERE t.state = 'queued' AND NOT t.parked AND t.queue = v_queue AND t.priority = v_prio
                   AND (t.pool IS NULL OR NOT EXISTS (SELECT 1 FROM pools p
                                                       WHERE p.name = t.pool
                                                         AND p.running_limit IS NOT NULL
                                                         AND p.running >= p.running_limit))
                 ORDER BY t.queue, t.priority, t.id LIMIT p_limit - v_n);
            v_n := cardinality(v_ids) - v_start;
            EXIT WHEN v_n >= p_limit;
        END LOOP;
    END LOOP;
    RETURN QUERY
    SELECT t.id, t.queue::text, t.priority, t.required, t.estimate::double precision FROM tasks t
     WHERE t.id = ANY (v_ids)
     ORDER BY t.priority DESC, t.id
     LIMIT p_limit;
END
$fn$;
