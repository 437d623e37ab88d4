-- waiting_heads: the first p_limit claimable tasks in claim order, for the scheduling policies.
--
-- The claim (claim_tasks) walks queued, unparked tasks by (priority, id),
-- priority descending when p_descending, taking each one that fits. A worker
-- that holds capacity back for a large task must know that order to choose
-- the claim budget that takes exactly what it planned, so this returns the
-- same order, skipping tasks of full pools as the claim does.
--
-- Cost does not grow with the backlog: priorities are found by a loose scan
-- of ix_tasks_claim (queue, priority, required, id), and within a priority
-- each required level gives its oldest tasks (at most what is still wanted),
-- merged by id. Read-only and lock-free: a plan is advice, the claim decides.
CREATE OR REPLACE FUNCTION waiting_heads(p_queues text[], p_limit integer, p_descending boolean)
RETURNS TABLE (id bigint, queue text, priority integer, required integer, estimate double precision)
LANGUAGE plpgsql
STABLE
SET search_path FROM CURRENT
SET plan_cache_mode = force_generic_plan
AS $fn$
DECLARE
    v_queues text[];
    v_bound bigint := CASE WHEN p_descending THEN 2147483648 ELSE -2147483649 END;
    v_prio integer;
    v_want integer := p_limit;
    v_got integer;
BEGIN
    IF p_limit IS NULL OR p_limit < 1 THEN
        RETURN;
    END IF;
    IF p_queues IS NULL THEN
        WITH RECURSIVE q(name) AS (
            (SELECT t.queue FROM tasks t WHERE t.state = 'queued' AND NOT t.parked ORDER BY t.queue LIMIT 1)
            UNION ALL
            SELECT (SELECT t.queue FROM tasks t
                     WHERE t.state = 'queued' AND NOT t.parked AND t.queue > q.name
                     ORDER BY t.queue LIMIT 1)
              FROM q WHERE q.name IS NOT NULL
        )
        SELECT array_agg(q.name) INTO v_queues FROM q WHERE q.name IS NOT NULL;
    ELSE
        v_queues := p_queues;
    END IF;
    IF v_queues IS NULL THEN
        RETURN;
    END IF;

    LOOP
        IF p_descending THEN
            SELECT max(x.priority) INTO v_prio FROM unnest(v_queues) AS q(name)
             CROSS JOIN LATERAL (SELECT t.priority FROM tasks t
                                  WHERE t.state = 'queued' AND NOT t.parked AND t.queue = q.name
                                    AND t.priority < v_bound
                                  ORDER BY t.priority DESC LIMIT 1) x;
        ELSE
            SELECT min(x.priority) INTO v_prio FROM unnest(v_queues) AS q(name)
             CROSS JOIN LATERAL (SELECT t.priority FROM tasks t
                                  WHERE t.state = 'queued' AND NOT t.parked AND t.queue = q.name
                                    AND t.priority > v_bound
                                  ORDER BY t.priority LIMIT 1) x;
        END IF;
        EXIT WHEN v_prio IS NULL;
        v_bound := v_prio;

        RETURN QUERY
        WITH RECURSIVE lv(queue, req) AS (
            SELECT q.name,
                   (SELECT t.required FROM tasks t
                     WHERE t.state = 'queued' AND NOT t.parked AND t.queue = q.name AND t.priority = v_prio
                     ORDER BY t.required LIMIT 1)
              FROM unnest(v_queues) AS q(name)
            UNION ALL
            SELECT lv.queue,
                   (SELECT t.required FROM tasks t
                     WHERE t.state = 'queued' AND NOT t.parked AND t.queue = lv.queue AND t.priority = v_prio
                       AND t.required > lv.req
                     ORDER BY t.required LIMIT 1)
              FROM lv WHERE lv.req IS NOT NULL
        )
        SELECT c.id, c.queue, c.priority, c.required, c.estimate
          FROM lv CROSS JOIN LATERAL (
               SELECT t.id, t.queue, t.priority, t.required, t.estimate FROM tasks t
                WHERE t.state = 'queued' AND NOT t.parked AND t.queue = lv.queue AND t.priority = v_prio
                  AND t.required >= lv.req AND t.required <= lv.req
                  AND (t.pool IS NULL OR NOT EXISTS (SELECT 1 FROM pools p
                                                      WHERE p.name = t.pool
                                                        AND p.running_limit IS NOT NULL
                                                        AND p.running >= p.running_limit))
                ORDER BY t.queue, t.priority, t.required, t.id LIMIT v_want) c
         WHERE lv.req IS NOT NULL
         ORDER BY c.id LIMIT v_want;
        GET DIAGNOSTICS v_got = ROW_COUNT;
        v_want := v_want - v_got;
        EXIT WHEN v_want <= 0;
    END LOOP;
    RETURN;
END
$fn$;
