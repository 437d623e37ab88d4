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
-- Plans: the function runs with plan_cache_mode = force_generic_plan (custom
-- plans were re-planned on every call and cost more than the probes). A probe
-- for the oldest task of one required level bounds required by a range
-- (>= and <=, not =) and orders by the claim-index key: with an equality the
-- planner drops required from the sort key, and the generic plan then walks
-- pk_tasks in id order past every row it cannot take.
--
-- Pool locks: the first pool row this transaction locks may be waited for;
-- every later one is taken with SKIP LOCKED (busy counts as full for this
-- call). A claim therefore never waits while holding a pool lock, so claims
-- cannot deadlock with each other or with releases, which lock in name order.
CREATE OR REPLACE FUNCTION claim_tasks(
    p_available bigint,
    p_limit integer,
    p_queues text[],
    p_worker text,
    p_lease double precision,
    p_descending boolean
) RETURNS SETOF tasks
LANGUAGE plpgsql
SET search_path FROM CURRENT
SET plan_cache_mode = force_generic_plan
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
    v_lv_queues text[];
    v_lv_reqs integer[];
    v_lv_ids bigint[];
    v_i integer;
    v_want bigint;
    v_bulk bigint[];
    v_seen integer;
    v_full text[] := '{}';
    v_locked_pools text[] := '{}';
    v_taken integer := 0;
    v_row tasks%ROWTYPE;
    v_got boolean;
    v_promoted bigint;
BEGIN
    IF p_limit IS NULL OR p_limit < 1 THEN
        RETURN;
    END IF;

    -- Due scheduled tasks become queued here, so a delayed task turns
    -- claimable at its run_at with no other process running. Every due task,
    -- in bounded batches: one batch alone would let a burst of due tasks hide
    -- a better priority that is due too.
    LOOP
        UPDATE tasks SET state = 'queued'
         WHERE id IN (SELECT s.id FROM tasks s
                       WHERE s.state = 'scheduled' AND s.run_at <= now()
                       ORDER BY s.run_at LIMIT 1000
                       FOR UPDATE SKIP LOCKED);
        GET DIAGNOSTICS v_promoted = ROW_COUNT;
        EXIT WHEN v_promoted < 1000;
    END LOOP;

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
        -- The next priority past v_bound that has a task small enough, in one
        -- statement: a loose scan over priorities that stops at the first one
        -- with a fitting required level (pools and locks are checked below).
        WITH RECURSIVE pr(p, n) AS (
            SELECT CASE WHEN p_descending
                        THEN (SELECT max(x.priority) FROM unnest(v_queues) AS q(name)
                               CROSS JOIN LATERAL (
                                   SELECT t.priority FROM tasks t
                                    WHERE t.state = 'queued' AND t.queue = q.name AND t.priority < v_bound
                                    ORDER BY t.priority DESC LIMIT 1) x)
                        ELSE (SELECT min(x.priority) FROM unnest(v_queues) AS q(name)
                               CROSS JOIN LATERAL (
                                   SELECT t.priority FROM tasks t
                                    WHERE t.state = 'queued' AND t.queue = q.name AND t.priority > v_bound
                                    ORDER BY t.priority LIMIT 1) x)
                   END, 1
            UNION ALL
            SELECT CASE WHEN p_descending
                        THEN (SELECT max(x.priority) FROM unnest(v_queues) AS q(name)
                               CROSS JOIN LATERAL (
                                   SELECT t.priority FROM tasks t
                                    WHERE t.state = 'queued' AND t.queue = q.name AND t.priority < pr.p
                                    ORDER BY t.priority DESC LIMIT 1) x)
                        ELSE (SELECT min(x.priority) FROM unnest(v_queues) AS q(name)
                               CROSS JOIN LATERAL (
                                   SELECT t.priority FROM tasks t
                                    WHERE t.state = 'queued' AND t.queue = q.name AND t.priority > pr.p
                                    ORDER BY t.priority LIMIT 1) x)
                   END, pr.n + 1
              FROM pr
             WHERE pr.p IS NOT NULL
               -- The smallest required of the priority, read from the index: an
               -- EXISTS here gets a seq scan in the generic plan (PG 16), which
               -- reads the whole backlog when nothing fits.
               AND NOT EXISTS (SELECT 1 FROM unnest(v_queues) AS q(name)
                                WHERE (SELECT t.required FROM tasks t
                                        WHERE t.state = 'queued' AND t.queue = q.name AND t.priority = pr.p
                                        ORDER BY t.required LIMIT 1) <= v_remaining)
        )
        SELECT pr.p INTO v_prio FROM pr ORDER BY pr.n DESC LIMIT 1;
        EXIT priorities WHEN v_prio IS NULL;
        v_bound := v_prio;

        <<take>>
        LOOP
            v_best_id := NULL;
            -- Every fitting required level of this priority (a loose scan) with
            -- its oldest takeable task, found without locking, oldest first.
            -- Then lock in that order with SKIP LOCKED, starting each level's
            -- walk at its oldest takeable task (rows before it were full-pool
            -- tasks a moment ago), so the walk is not done twice. A level whose oldest
            -- is not older than the best locked so far cannot win, so usually
            -- one lock is taken and the loop ends.
            SELECT array_agg(x.queue ORDER BY x.id), array_agg(x.req ORDER BY x.id), array_agg(x.id ORDER BY x.id)
              INTO v_lv_queues, v_lv_reqs, v_lv_ids
              FROM (
                WITH RECURSIVE lv(queue, req) AS (
                    SELECT q.name,
                           (SELECT t.required FROM tasks t
                             WHERE t.state = 'queued' AND t.queue = q.name AND t.priority = v_prio
                               AND t.required <= v_remaining
                             ORDER BY t.required LIMIT 1)
                      FROM unnest(v_queues) AS q(name)
                    UNION ALL
                    SELECT lv.queue,
                           (SELECT t.required FROM tasks t
                             WHERE t.state = 'queued' AND t.queue = lv.queue AND t.priority = v_prio
                               AND t.required > lv.req AND t.required <= v_remaining
                             ORDER BY t.required LIMIT 1)
                      FROM lv WHERE lv.req IS NOT NULL
                )
                SELECT lv.queue, lv.req, c.id
                  FROM lv CROSS JOIN LATERAL (
                       SELECT t.id FROM tasks t
                        WHERE t.state = 'queued' AND t.queue = lv.queue AND t.priority = v_prio
                          AND t.required >= lv.req AND t.required <= lv.req
                          AND (t.pool IS NULL OR (
                               t.pool <> ALL (v_full)
                               AND NOT EXISTS (SELECT 1 FROM pools p
                                                WHERE p.name = t.pool
                                                  AND p.running_limit IS NOT NULL
                                                  AND p.running >= p.running_limit)))
                        ORDER BY t.queue, t.priority, t.required, t.id LIMIT 1) c
                 WHERE lv.req IS NOT NULL
              ) x;

            -- Batch fast path: one queue and one fitting level left, and room for
            -- more than one task. Then the best tasks are simply that level's
            -- oldest unlocked ones, in id order: lock them in one statement.
            v_want := p_limit - v_taken;
            IF cardinality(v_lv_ids) = 1 AND v_want > 1 THEN
                IF p_available IS NOT NULL AND v_lv_reqs[1] > 0 THEN
                    v_want := LEAST(v_want, v_remaining / v_lv_reqs[1]);
                END IF;
            END IF;
            IF cardinality(v_lv_ids) = 1 AND v_want > 1 THEN
                v_bulk := '{}';
                v_seen := 0;
                FOR v_cand IN
                    SELECT t.id, t.pool, t.required FROM tasks t
                     WHERE t.state = 'queued' AND t.queue = v_lv_queues[1] AND t.priority = v_prio
                       AND t.required >= v_lv_reqs[1] AND t.required <= v_lv_reqs[1]
                       AND t.id >= v_lv_ids[1]
                       AND (t.pool IS NULL OR (
                            t.pool <> ALL (v_full)
                            AND NOT EXISTS (SELECT 1 FROM pools p
                                             WHERE p.name = t.pool
                                               AND p.running_limit IS NOT NULL
                                               AND p.running >= p.running_limit)))
                     ORDER BY t.queue, t.priority, t.required, t.id LIMIT v_want
                     FOR UPDATE OF t SKIP LOCKED
                LOOP
                    v_seen := v_seen + 1;
                    IF v_cand.pool IS NOT NULL THEN
                        IF v_cand.pool = ANY (v_full) THEN
                            CONTINUE;
                        END IF;
                        v_best_pool := v_cand.pool;
                        SELECT s.got, s.locked INTO v_got, v_locked_pools
                          FROM take_pool_slot(v_best_pool, v_locked_pools) s;
                        IF NOT v_got THEN
                            v_full := v_full || v_best_pool;
                            CONTINUE;
                        END IF;
                    END IF;
                    v_bulk := v_bulk || v_cand.id;
                END LOOP;
                -- Nothing unlocked left at this level: on to the next priority.
                -- Locked rows skipped for a full pool grew v_full: look again.
                EXIT take WHEN v_seen = 0;
                CONTINUE take WHEN cardinality(v_bulk) = 0;
                RETURN QUERY
                    WITH u AS (
                        UPDATE tasks
                           SET state = 'running',
                               attempts = attempts + 1,
                               started_at = now(),
                               worker = p_worker,
                               lease_token = gen_random_uuid(),
                               lease_seconds = p_lease,
                               lease_expires_at = now() + make_interval(secs => p_lease)
                         WHERE id = ANY (v_bulk)
                        RETURNING *)
                    SELECT * FROM u ORDER BY u.id;
                v_taken := v_taken + cardinality(v_bulk);
                EXIT priorities WHEN v_taken >= p_limit;
                IF p_available IS NOT NULL THEN
                    v_remaining := v_remaining - v_lv_reqs[1] * cardinality(v_bulk);
                END IF;
                CONTINUE take;
            END IF;

            FOR v_i IN 1 .. COALESCE(cardinality(v_lv_ids), 0) LOOP
                EXIT WHEN v_best_id IS NOT NULL AND v_lv_ids[v_i] >= v_best_id;
                SELECT t.id, t.pool, t.required INTO v_cand FROM tasks t
                 WHERE t.state = 'queued' AND t.queue = v_lv_queues[v_i] AND t.priority = v_prio
                   AND t.required >= v_lv_reqs[v_i] AND t.required <= v_lv_reqs[v_i]
                   AND t.id >= v_lv_ids[v_i]
                   AND t.id < COALESCE(v_best_id, 9223372036854775807)
                   AND (t.pool IS NULL OR (
                        t.pool <> ALL (v_full)
                        AND NOT EXISTS (SELECT 1 FROM pools p
                                         WHERE p.name = t.pool
                                           AND p.running_limit IS NOT NULL
                                           AND p.running >= p.running_limit)))
                 ORDER BY t.queue, t.priority, t.required, t.id LIMIT 1
                 FOR UPDATE OF t SKIP LOCKED;
                IF FOUND THEN
                    v_best_id := v_cand.id;
                    v_best_pool := v_cand.pool;
                    v_best_required := v_cand.required;
                END IF;
            END LOOP;
            EXIT take WHEN v_best_id IS NULL;

            IF v_best_pool IS NOT NULL THEN
                SELECT s.got, s.locked INTO v_got, v_locked_pools
                  FROM take_pool_slot(v_best_pool, v_locked_pools) s;
                IF NOT v_got THEN
                    -- The pool filled up since the probe: leave it out and look again.
                    v_full := v_full || v_best_pool;
                    CONTINUE take;
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
