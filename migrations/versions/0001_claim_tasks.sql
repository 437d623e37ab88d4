-- claim_tasks: the resource-fit claim, as one PL/pgSQL function.
--
-- Returns up to p_limit tasks, walking the claimable (queued) tasks in
-- (priority, id) order (priority descending when p_descending) and taking each
-- one whose required fits in what is left of p_available (NULL: no limit),
-- whose pool has a free slot, and that no concurrent claim has locked.
--
-- Cost does not grow with the backlog: it is a loose index scan over
-- ix_tasks_claim (queue, priority, required, id) WHERE state = 'queued', one
-- probe per (queue, priority, required level <= what is left), each
-- LIMIT 1 FOR UPDATE SKIP LOCKED, stopping at the first priority that yields.
--
-- Pool locks: the first pool row this transaction locks may be waited for;
-- every later one is taken with SKIP LOCKED (busy counts as full for this
-- call). A claim therefore never waits while holding a pool lock, so claims
-- cannot deadlock with each other or with releases, which lock in name order.
CREATE FUNCTION claim_tasks(
    p_available bigint,
    p_limit integer,
    p_queues text[],
    p_worker text,
    p_lease double precision,
    p_descending boolean
) RETURNS SETOF tasks
LANGUAGE plpgsql
SET search_path FROM CURRENT
AS $fn$
DECLARE
    v_remaining bigint := COALESCE(p_available, 9223372036854775807);
    v_queues text[];
    v_queue text;
    v_bound bigint := CASE WHEN p_descending THEN 2147483648 ELSE -2147483649 END;
    v_prio integer;
    v_level bigint;
    v_best_id bigint;
    v_best_pool text;
    v_best_required integer;
    v_cand record;
    v_full text[] := '{}';
    v_locked_pools text[] := '{}';
    v_taken integer := 0;
    v_row tasks%ROWTYPE;
    v_got boolean;
BEGIN
    IF p_limit IS NULL OR p_limit < 1 THEN
        RETURN;
    END IF;

    -- Due scheduled tasks become queued here, so a delayed task turns
    -- claimable at its run_at with no other process running.
    UPDATE tasks SET state = 'queued'
     WHERE id IN (SELECT s.id FROM tasks s
                   WHERE s.state = 'scheduled' AND s.run_at <= now()
                   ORDER BY s.run_at LIMIT 1000
                   FOR UPDATE SKIP LOCKED);

    IF p_queues IS NULL THEN
        -- Every queue that has queued work, by a loose scan of the claim index.
        WITH RECURSIVE q(name) AS (
            (SELECT t.queue FROM tasks t WHERE t.state = 'queued' ORDER BY t.queue LIMIT 1)
            UNION ALL
            SELECT (SELECT t.queue FROM tasks t
                     WHERE t.state = 'queued' AND t.queue > q.name
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

    <<priorities>>
    LOOP
        IF p_descending THEN
            SELECT max(x.priority) INTO v_prio
              FROM unnest(v_queues) AS q(name)
              CROSS JOIN LATERAL (
                  SELECT t.priority FROM tasks t
                   WHERE t.state = 'queued' AND t.queue = q.name AND t.priority < v_bound
                   ORDER BY t.priority DESC LIMIT 1) x;
        ELSE
            SELECT min(x.priority) INTO v_prio
              FROM unnest(v_queues) AS q(name)
              CROSS JOIN LATERAL (
                  SELECT t.priority FROM tasks t
                   WHERE t.state = 'queued' AND t.queue = q.name AND t.priority > v_bound
                   ORDER BY t.priority LIMIT 1) x;
        END IF;
        EXIT priorities WHEN v_prio IS NULL;
        v_bound := v_prio;

        <<take>>
        LOOP
            v_best_id := NULL;
            FOREACH v_queue IN ARRAY v_queues LOOP
                v_level := -1;
                LOOP
                    -- next distinct required level that still fits
                    SELECT t.required INTO v_level FROM tasks t
                     WHERE t.state = 'queued' AND t.queue = v_queue AND t.priority = v_prio
                       AND t.required > v_level AND t.required <= v_remaining
                     ORDER BY t.required LIMIT 1;
                    EXIT WHEN NOT FOUND;
                    -- oldest task at that level, better than the best so far
                    SELECT t.id, t.pool, t.required INTO v_cand FROM tasks t
                     WHERE t.state = 'queued' AND t.queue = v_queue AND t.priority = v_prio
                       AND t.required = v_level
                       AND t.id < COALESCE(v_best_id, 9223372036854775807)
                       AND (t.pool IS NULL OR (
                            t.pool <> ALL (v_full)
                            AND NOT EXISTS (SELECT 1 FROM pools p
                                             WHERE p.name = t.pool
                                               AND p.running_limit IS NOT NULL
                                               AND p.running >= p.running_limit)))
                     ORDER BY t.id LIMIT 1
                     FOR UPDATE OF t SKIP LOCKED;
                    IF FOUND THEN
                        v_best_id := v_cand.id;
                        v_best_pool := v_cand.pool;
                        v_best_required := v_cand.required;
                    END IF;
                END LOOP;
            END LOOP;
            EXIT take WHEN v_best_id IS NULL;

            IF v_best_pool IS NOT NULL THEN
                IF cardinality(v_locked_pools) = 0 OR v_best_pool = ANY (v_locked_pools) THEN
                    UPDATE pools SET running = running + 1
                     WHERE name = v_best_pool
                       AND (running_limit IS NULL OR running < running_limit);
                    v_got := FOUND;
                ELSE
                    UPDATE pools SET running = running + 1
                     WHERE name = (SELECT p.name FROM pools p
                                    WHERE p.name = v_best_pool
                                      AND (p.running_limit IS NULL OR p.running < p.running_limit)
                                    FOR UPDATE SKIP LOCKED);
                    v_got := FOUND;
                END IF;
                IF NOT v_got AND NOT EXISTS (SELECT 1 FROM pools p WHERE p.name = v_best_pool) THEN
                    INSERT INTO pools (name, running) VALUES (v_best_pool, 1)
                    ON CONFLICT (name) DO NOTHING;
                    v_got := FOUND;
                END IF;
                IF NOT v_got THEN
                    -- The pool filled up since the probe: leave it out and look again.
                    v_full := v_full || v_best_pool;
                    CONTINUE take;
                END IF;
                IF NOT v_best_pool = ANY (v_locked_pools) THEN
                    v_locked_pools := v_locked_pools || v_best_pool;
                END IF;
            END IF;

            UPDATE tasks
               SET state = 'running',
                   attempts = attempts + 1,
                   started_at = now(),
                   worker = p_worker,
                   lease_token = gen_random_uuid(),
                   lease_seconds = p_lease,
                   lease_expires_at = now() + make_interval(secs => p_lease)
             WHERE id = v_best_id
            RETURNING * INTO v_row;
            RETURN NEXT v_row;

            v_taken := v_taken + 1;
            EXIT priorities WHEN v_taken >= p_limit;
            IF p_available IS NOT NULL THEN
                v_remaining := v_remaining - v_best_required;
            END IF;
        END LOOP take;
    END LOOP priorities;
    RETURN;
END
$fn$;
