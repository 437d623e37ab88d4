-- few_fits: over several queues, every fitting task read whole when they are
-- few; the first p_n of them in claim order after a key.
--
-- Claim order is the key (k1, id), k1 = priority, or -priority when
-- p_descending. Reads the queued, unparked tasks with required <= p_remaining,
-- index only, up to p_budget rows in all (rows before the key and in the
-- pools of p_full count too: they are read):
-- - of p_queues, a list of c_fminq queues or more, queue by queue in
--   ix_tasks_fit_exact's order, (queue, required, priority, id); the budget
--   is c_fscan rows a queue when p_budget is NULL;
-- - of every queue when p_queues is NULL (version 2), in one range of
--   ix_tasks_fit_any_exact (required, priority, id), with no queue listed.
--   p_budget is the caller's (fit_candidate gives c_fscan rows for each
--   claimable queue it listed); NULL takes the budget of the read that last
--   set the 'few' hint below in this session (the setting
--   taskqueue.fit_budget; claim_tasks' step F passes none), and with none
--   there is no read. A claim over every queue asks fit_candidate with the
--   queues it listed, all of them once its walk ran dry, so that budget is
--   c_fscan rows for each of them.
-- Returns:
-- - the ids of the first p_n of them after the key that are not in p_full's
--   pools, in claim order ('{}': none), when every fit was read;
-- - NULL when there were more fits than the budget: the caller searches
--   another way;
-- - NULL, reading nothing, over a list of fewer than c_fminq queues (their
--   levels cost a few dozen probes: the read would save little; the hint is
--   left alone).
-- The levels of fit_candidate cost a probe per queue and level (about 30 for
-- an amount near a million), whatever the number of fits; over 100 queues
-- with every task its own priority, sizes in bytes and 0.05% of the tasks
-- fitting (the sixth random draw's r14), 65 ms a call. Reading 100 fits is
-- one descent a queue. c_fscan rows cost less than one queue's levels (a
-- row of an index-only range costs a small part of a descent, and only the
-- first p_n are sorted): with 512, 5,000 fits over a list of 20 queues were
-- read whole on every claim, 0.8x the levels' claims a second
-- (listed_falling at 1,000,000 tasks).
-- Version 1 read every queue's fits queue by queue too, after listing the
-- queues (one descent each, about 1 ms for 100), and over more than 128
-- queues not at all: over 1,000 queues with 0.05% of the tasks fitting
-- (queues_mb_rare), each claim read every queue's range again in
-- fit_candidate, 9.7 claims a second at 1M tasks. One range
-- of an index without the queue column reads them at the cost of the rows
-- alone, for one more index entry a task enqueued.
--
-- Session hints (a setting, taskqueue.fit_scan), which skip a statement,
-- never a row, so they cannot change what is found:
-- - 'over:R:n': a read at amount R ran past its budget (more left means more
--   fits), so calls of at least R return NULL without reading, c_fskips of
--   them, and then one reads again;
-- - 'few:R': a read at amount R found every fit within its budget. claim_tasks
--   (version 37) then asks this function first, before its look, for claims
--   of at most R over every queue or a list of 4 to 128. It is first set by
--   fit_candidate's read, and only a claim whose look and walks found no fit
--   asks fit_candidate: one whose look finds dense fits never pays for the
--   read.
CREATE OR REPLACE FUNCTION few_fits(
    p_queues text[],
    p_remaining bigint,
    p_lk bigint,
    p_lid bigint,
    p_descending boolean,
    p_full text[],
    p_n integer,
    p_budget bigint DEFAULT NULL
) RETURNS bigint[]
LANGUAGE plpgsql
STABLE
SET search_path FROM CURRENT
SET plan_cache_mode = force_generic_plan
SET enable_seqscan = off
SET jit = off
AS $fn$
DECLARE
    c_fscan CONSTANT integer := 128;   -- fitting rows read per queue
    c_fskips CONSTANT integer := 31;   -- calls that skip the read after it overflowed
    c_fminq CONSTANT integer := 4;     -- fewer queues: NULL at once
    v_hint text := COALESCE(current_setting('taskqueue.fit_scan', true), '');
    v_budget bigint;
    v_n bigint;
    v_ids bigint[];
BEGIN
    IF v_hint ~ '^over:[0-9]{1,19}:[0-9]{1,3}$' AND p_remaining >= split_part(v_hint, ':', 2)::numeric
       AND split_part(v_hint, ':', 3)::integer < c_fskips THEN
        PERFORM set_config('taskqueue.fit_scan', 'over:' || split_part(v_hint, ':', 2) || ':'
                           || (split_part(v_hint, ':', 3)::integer + 1)::text, false);
        RETURN NULL;
    END IF;
    IF p_queues IS NULL THEN
        -- Every queue (version 2): one range of the index without the queue
        -- column, within the caller's budget or the session's last.
        IF p_budget IS NOT NULL THEN
            v_budget := p_budget;
        ELSIF COALESCE(current_setting('taskqueue.fit_budget', true), '') ~ '^[0-9]{1,18}$' THEN
            v_budget := current_setting('taskqueue.fit_budget')::bigint;
        ELSE
            RETURN NULL;  -- no read has found the fits few yet: the caller searches another way
        END IF;
        IF cardinality(p_full) = 0 THEN
            WITH f AS MATERIALIZED (
                SELECT t.id, CASE WHEN p_descending THEN -t.priority::bigint ELSE t.priority END AS k1
                  FROM tasks t
                 WHERE t.state = 'queued' AND NOT t.parked AND t.id > 0 AND t.required <= p_remaining
                 ORDER BY t.required, t.priority, t.id LIMIT v_budget + 1)
            SELECT (SELECT count(*) FROM f),
                   (SELECT array_agg(g.id ORDER BY g.k1, g.id)
                      FROM (SELECT f.id, f.k1 FROM f WHERE (f.k1, f.id) > (p_lk, p_lid)
                             ORDER BY f.k1, f.id LIMIT p_n) g)
              INTO v_n, v_ids;
        ELSE
            WITH f AS MATERIALIZED (
                SELECT t.id, t.pool, CASE WHEN p_descending THEN -t.priority::bigint ELSE t.priority END AS k1
                  FROM tasks t
                 WHERE t.state = 'queued' AND NOT t.parked AND t.id > 0 AND t.required <= p_remaining
                 ORDER BY t.required, t.priority, t.id LIMIT v_budget + 1)
            SELECT (SELECT count(*) FROM f),
                   (SELECT array_agg(g.id ORDER BY g.k1, g.id)
                      FROM (SELECT f.id, f.k1 FROM f
                             WHERE (f.k1, f.id) > (p_lk, p_lid) AND (f.pool IS NULL OR f.pool <> ALL (p_full))
                             ORDER BY f.k1, f.id LIMIT p_n) g)
              INTO v_n, v_ids;
        END IF;
    ELSIF cardinality(p_queues) < c_fminq THEN
        RETURN NULL;
    ELSE
        v_budget := COALESCE(p_budget, c_fscan::bigint * cardinality(p_queues));
        -- Two statements, so the common one (no pool known full) reads the index
        -- alone: naming the pool would fetch every row read from the table.
        IF cardinality(p_full) = 0 THEN
            WITH f AS MATERIALIZED (
                SELECT x.id, CASE WHEN p_descending THEN -x.priority::bigint ELSE x.priority END AS k1
                  FROM unnest(p_queues) AS q(name)
                 CROSS JOIN LATERAL (
                       SELECT t.id, t.priority FROM tasks t
                        WHERE t.state = 'queued' AND NOT t.parked AND t.queue = q.name
                          AND t.required <= p_remaining
                        ORDER BY t.required, t.priority, t.id LIMIT v_budget + 1) x
                 LIMIT v_budget + 1)
            SELECT (SELECT count(*) FROM f),
                   (SELECT array_agg(g.id ORDER BY g.k1, g.id)
                      FROM (SELECT f.id, f.k1 FROM f WHERE (f.k1, f.id) > (p_lk, p_lid)
                             ORDER BY f.k1, f.id LIMIT p_n) g)
              INTO v_n, v_ids;
        ELSE
            WITH f AS MATERIALIZED (
                SELECT x.id, x.pool, CASE WHEN p_descending THEN -x.priority::bigint ELSE x.priority END AS k1
                  FROM unnest(p_queues) AS q(name)
                 CROSS JOIN LATERAL (
                       SELECT t.id, t.priority, t.pool FROM tasks t
                        WHERE t.state = 'queued' AND NOT t.parked AND t.queue = q.name
                          AND t.required <= p_remaining
                        ORDER BY t.required, t.priority, t.id LIMIT v_budget + 1) x
                 LIMIT v_budget + 1)
            SELECT (SELECT count(*) FROM f),
                   (SELECT array_agg(g.id ORDER BY g.k1, g.id)
                      FROM (SELECT f.id, f.k1 FROM f
                             WHERE (f.k1, f.id) > (p_lk, p_lid) AND (f.pool IS NULL OR f.pool <> ALL (p_full))
                             ORDER BY f.k1, f.id LIMIT p_n) g)
              INTO v_n, v_ids;
        END IF;
    END IF;
    IF v_n > v_budget THEN
        PERFORM set_config('taskqueue.fit_scan', 'over:' || p_remaining::text || ':0', false);
        RETURN NULL;
    END IF;
    IF NOT (v_hint ~ '^few:[0-9]{1,19}$' AND split_part(v_hint, ':', 2)::numeric >= p_remaining) THEN
        PERFORM set_config('taskqueue.fit_scan', 'few:' || p_remaining::text, false);
        PERFORM set_config('taskqueue.fit_budget', v_budget::text, false);
    END IF;
    RETURN COALESCE(v_ids, '{}');
END
$fn$;
