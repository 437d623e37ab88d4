-- fit_candidate: the first claimable task after a key that fits, unlocked.
--
-- Claim order is the key (k1, id), with k1 = priority, or -priority when
-- p_descending. Returns the smallest key after (p_lk, p_lid) among queued,
-- unparked tasks of p_queues with required <= p_remaining, leaving out the
-- pools the caller already found full (p_full); other pools and row locks
-- are the caller's business (take_task). Its cost is bounded by bucket
-- counts, not by rows, distinct priorities or distinct required values:
--
-- 1. Every bucket (see required_bucket) whose values all fit is whole: its
--    best row is one probe of ix_tasks_fit (queue, bucket, priority, id), at
--    most 124 probes. When p_remaining + 1 opens a bucket, that is all.
-- 2. The boundary bucket holds tasks that fit and tasks that do not; only
--    rows better than the best of step 1 matter, per queue:
--    a. a walk of 64 rows of it in claim order: done at the first fit, or
--       when the walk reaches the best (fitting rows are often dense);
--    b. its fine buckets (see required_fine, 64 per bucket) below the one
--       that holds p_remaining + 1 are whole: one probe each of
--       ix_tasks_fit_fine;
--    c. the fine boundary bucket, 1/256 of a doubling wide: a walk of it in
--       claim order (done at the first fit) and a visit of the distinct
--       required values of its fitting range [floor, p_remaining] in
--       ix_tasks_fit_exact (one probe each, done when all were visited) take
--       turns with growing budgets (64, 1024, 16384, ... rows; 32, 256,
--       2048, ... values), so the cost is about twice the cheaper of the two.
--
-- Version 2: every walk bounds its rows with LIMIT and filters the upper key
-- outside it. PostgreSQL 15 cannot end an index scan on a row comparison
-- (priority, id) < (a, b) that is decided by id, so version 1's walk read
-- to the end of the priority: 70 ms a claim on one priority and 1M rows.
--
-- Descending order reads each probe as "the rest of this priority, else the
-- highest priority below it" (two probes), since id stays ascending.
CREATE OR REPLACE FUNCTION fit_candidate(
    p_queues text[],
    p_remaining bigint,
    p_lk bigint,
    p_lid bigint,
    p_descending boolean,
    p_full text[],
    OUT id bigint,
    OUT k1 bigint,
    OUT required integer,
    OUT pool text
)
LANGUAGE plpgsql
STABLE
SET search_path FROM CURRENT
SET plan_cache_mode = force_generic_plan
AS $fn$
DECLARE
    v_lp integer := CASE WHEN p_descending THEN (-p_lk)::integer ELSE p_lk::integer END;
    v_bb integer := CASE WHEN p_remaining >= 2147483647 THEN 124 ELSE required_bucket((p_remaining + 1)::integer) END;
    v_lo integer;
    v_bk bigint := 9223372036854775807;
    v_bid bigint := 9223372036854775807;
    v_fb integer;
    v_flo integer;
    v_q text;
    v_walked integer;
    v_last bigint[];
    v_fid bigint;
    v_wk bigint;
    v_wid bigint;
    v_wp integer;
    v_r integer;
    v_walk integer;
    v_visit integer;
    v_values integer[];
    v_visited integer;
    v_c record;
BEGIN
    -- 1. Whole buckets: one probe each.
    IF v_bb > 0 AND NOT p_descending THEN
        SELECT c.id, c.k1, c.required, c.pool INTO id, k1, required, pool
          FROM unnest(p_queues) AS q(name)
         CROSS JOIN generate_series(0, v_bb - 1) AS b(n)
         CROSS JOIN LATERAL (
               SELECT t.id, t.priority::bigint AS k1, t.required, t.pool FROM tasks t
                WHERE t.state = 'queued' AND NOT t.parked AND t.queue = q.name AND (t.pool IS NULL OR t.pool <> ALL (p_full)) AND t.bucket = b.n
                  AND (t.priority, t.id) > (v_lp, p_lid)
                ORDER BY t.priority, t.id LIMIT 1) c
         ORDER BY c.k1, c.id LIMIT 1;
    ELSIF v_bb > 0 THEN
        SELECT c.id, c.k1, c.required, c.pool INTO id, k1, required, pool
          FROM unnest(p_queues) AS q(name)
         CROSS JOIN generate_series(0, v_bb - 1) AS b(n)
         CROSS JOIN LATERAL (
               (SELECT t.id, -t.priority::bigint AS k1, t.required, t.pool FROM tasks t
                 WHERE t.state = 'queued' AND NOT t.parked AND t.queue = q.name AND (t.pool IS NULL OR t.pool <> ALL (p_full)) AND t.bucket = b.n
                   AND (t.priority, t.id) > (v_lp, p_lid) AND t.priority <= v_lp
                 ORDER BY t.priority, t.id LIMIT 1)
               UNION ALL
               (SELECT t.id, -t.priority::bigint AS k1, t.required, t.pool
                 FROM (SELECT s.priority FROM tasks s WHERE s.state = 'queued' AND NOT s.parked AND s.queue = q.name AND s.bucket = b.n AND s.priority < v_lp AND (s.pool IS NULL OR s.pool <> ALL (p_full)) ORDER BY s.priority DESC LIMIT 1) g
                 CROSS JOIN LATERAL (
                     SELECT t.* FROM tasks t
                      WHERE t.state = 'queued' AND NOT t.parked AND t.queue = q.name AND (t.pool IS NULL OR t.pool <> ALL (p_full)) AND t.bucket = b.n
                        AND t.priority >= g.priority AND t.priority <= g.priority
                      ORDER BY t.priority, t.id LIMIT 1) t)
               LIMIT 1) c
         ORDER BY c.k1, c.id LIMIT 1;
    END IF;
    IF id IS NOT NULL THEN
        v_bk := k1;
        v_bid := id;
    END IF;
    IF v_bb >= 124 THEN
        RETURN;  -- no limit on required: every bucket was whole
    END IF;

    -- 2. The boundary bucket, queue by queue, for rows better than the best so
    -- far.
    v_lo := CASE WHEN v_bb < 16 THEN v_bb ELSE (4 + v_bb % 4) << (v_bb / 4 - 2) END;
    IF v_lo > p_remaining THEN
        RETURN;  -- p_remaining + 1 opens its bucket: every fitting bucket was whole
    END IF;
    v_fb := required_fine((p_remaining + 1)::integer);
    v_flo := CASE WHEN v_fb < 512 THEN v_fb ELSE ((v_fb % 256) + 256) << (v_fb / 256 - 1) END;
    FOREACH v_q IN ARRAY p_queues LOOP
        v_wk := p_lk;
        v_wid := p_lid;
        v_wp := v_lp;
        -- 2a. A walk of the boundary bucket in claim order.
        SELECT count(*), max(ARRAY[w.k1, w.id]),
               (array_agg(w.id ORDER BY w.k1, w.id) FILTER (WHERE w.required <= p_remaining))[1]
          INTO v_walked, v_last, v_fid
          FROM ((SELECT t.id, t.priority::bigint AS k1, t.required FROM tasks t
                  WHERE t.state = 'queued' AND NOT t.parked AND t.queue = v_q AND (t.pool IS NULL OR t.pool <> ALL (p_full))
                    AND t.bucket = v_bb AND NOT p_descending
                    AND (t.priority, t.id) > (v_wp, v_wid) AND t.priority <= v_bk
                  ORDER BY t.priority, t.id LIMIT 64)
                UNION ALL
                (SELECT t.id, -t.priority::bigint, t.required FROM tasks t
                  WHERE t.state = 'queued' AND NOT t.parked AND t.queue = v_q AND (t.pool IS NULL OR t.pool <> ALL (p_full))
                    AND t.bucket = v_bb AND p_descending
                    AND (t.priority, t.id) > (v_wp, v_wid) AND t.priority <= v_wp
                  ORDER BY t.priority, t.id LIMIT 64)
                UNION ALL
                (SELECT t.id, -t.priority::bigint, t.required
                   FROM (SELECT s.priority FROM tasks s
                          WHERE s.state = 'queued' AND NOT s.parked AND s.queue = v_q AND (s.pool IS NULL OR s.pool <> ALL (p_full))
                            AND s.bucket = v_bb AND s.priority < v_wp AND p_descending
                          ORDER BY s.priority DESC LIMIT 1) g
                  CROSS JOIN LATERAL (
                      SELECT t.* FROM tasks t
                       WHERE t.state = 'queued' AND NOT t.parked AND t.queue = v_q AND (t.pool IS NULL OR t.pool <> ALL (p_full))
                         AND t.bucket = v_bb AND t.priority >= g.priority AND t.priority <= g.priority
                       ORDER BY t.priority, t.id LIMIT 64) t)
                LIMIT 64) w
         WHERE (w.k1, w.id) < (v_bk, v_bid);
        IF v_fid IS NOT NULL THEN
            SELECT t.id, CASE WHEN p_descending THEN -t.priority::bigint ELSE t.priority END, t.required, t.pool
              INTO id, k1, required, pool
              FROM tasks t WHERE t.id = v_fid;
            v_bk := k1;
            v_bid := id;
            CONTINUE;  -- the first fit in claim order: nothing before it fits
        END IF;
        CONTINUE WHEN v_walked < 64 AND NOT p_descending;  -- the walk reached the best (or the end)
        IF v_walked > 0 THEN
            v_wk := v_last[1];
            v_wid := v_last[2];
            v_wp := CASE WHEN p_descending THEN (-v_wk)::integer ELSE v_wk::integer END;
        END IF;

        -- 2b. The whole fine buckets of the boundary bucket: one probe each.
        IF NOT p_descending THEN
            SELECT c.id, c.k1, c.required, c.pool INTO v_c
              FROM generate_series(required_fine(v_lo), v_fb - 1) AS b(n)
             CROSS JOIN LATERAL (
                   SELECT t.id, t.priority::bigint AS k1, t.required, t.pool FROM tasks t
                    WHERE t.state = 'queued' AND NOT t.parked AND t.queue = v_q AND (t.pool IS NULL OR t.pool <> ALL (p_full))
                      AND required_fine(t.required) = b.n AND (t.priority, t.id) > (v_wp, v_wid)
                    ORDER BY t.priority, t.id LIMIT 1) c
             WHERE (c.k1, c.id) < (v_bk, v_bid)
             ORDER BY c.k1, c.id LIMIT 1;
        ELSE
            SELECT c.id, c.k1, c.required, c.pool INTO v_c
              FROM generate_series(required_fine(v_lo), v_fb - 1) AS b(n)
             CROSS JOIN LATERAL (
                   (SELECT t.id, -t.priority::bigint AS k1, t.required, t.pool FROM tasks t
                     WHERE t.state = 'queued' AND NOT t.parked AND t.queue = v_q AND (t.pool IS NULL OR t.pool <> ALL (p_full))
                       AND required_fine(t.required) = b.n
                       AND (t.priority, t.id) > (v_wp, v_wid) AND t.priority <= v_wp
                     ORDER BY t.priority, t.id LIMIT 1)
                   UNION ALL
                   (SELECT t.id, -t.priority::bigint AS k1, t.required, t.pool
                     FROM (SELECT s.priority FROM tasks s
                            WHERE s.state = 'queued' AND NOT s.parked AND s.queue = v_q AND required_fine(s.required) = b.n
                              AND s.priority < v_wp AND (s.pool IS NULL OR s.pool <> ALL (p_full))
                            ORDER BY s.priority DESC LIMIT 1) g
                     CROSS JOIN LATERAL (
                         SELECT t.* FROM tasks t
                          WHERE t.state = 'queued' AND NOT t.parked AND t.queue = v_q AND (t.pool IS NULL OR t.pool <> ALL (p_full))
                            AND required_fine(t.required) = b.n AND t.priority >= g.priority AND t.priority <= g.priority
                          ORDER BY t.priority, t.id LIMIT 1) t)
                   LIMIT 1) c
             WHERE (c.k1, c.id) < (v_bk, v_bid)
             ORDER BY c.k1, c.id LIMIT 1;
        END IF;
        IF v_c.id IS NOT NULL THEN
            id := v_c.id;
            k1 := v_c.k1;
            required := v_c.required;
            pool := v_c.pool;
            v_bk := k1;
            v_bid := id;
        END IF;
        CONTINUE WHEN v_flo > p_remaining;  -- p_remaining + 1 opens its fine bucket

        -- 2c. The fine boundary bucket: walk and visit take turns with growing
        -- budgets (a walked row, read in index order, costs several times less
        -- than a visited value's probe), so the cost stays within a small
        -- factor of the cheaper of the two.
        v_r := v_flo - 1;
        v_walk := 64;
        v_visit := 32;
        LOOP
            -- Walk the fine bucket in claim order from where the last walk stopped.
            SELECT count(*), max(ARRAY[w.k1, w.id]),
                   (array_agg(w.id ORDER BY w.k1, w.id) FILTER (WHERE w.required <= p_remaining))[1]
              INTO v_walked, v_last, v_fid
              FROM ((SELECT t.id, t.priority::bigint AS k1, t.required FROM tasks t
                      WHERE t.state = 'queued' AND NOT t.parked AND t.queue = v_q AND (t.pool IS NULL OR t.pool <> ALL (p_full))
                        AND required_fine(t.required) = v_fb AND NOT p_descending
                        AND (t.priority, t.id) > (v_wp, v_wid) AND t.priority <= v_bk
                      ORDER BY t.priority, t.id LIMIT v_walk)
                    UNION ALL
                    (SELECT t.id, -t.priority::bigint, t.required FROM tasks t
                      WHERE t.state = 'queued' AND NOT t.parked AND t.queue = v_q AND (t.pool IS NULL OR t.pool <> ALL (p_full))
                        AND required_fine(t.required) = v_fb AND p_descending
                        AND (t.priority, t.id) > (v_wp, v_wid) AND t.priority <= v_wp
                      ORDER BY t.priority, t.id LIMIT v_walk)
                    UNION ALL
                    (SELECT t.id, -t.priority::bigint, t.required
                       FROM (SELECT s.priority FROM tasks s
                              WHERE s.state = 'queued' AND NOT s.parked AND s.queue = v_q AND (s.pool IS NULL OR s.pool <> ALL (p_full))
                                AND required_fine(s.required) = v_fb AND s.priority < v_wp AND p_descending
                              ORDER BY s.priority DESC LIMIT 1) g
                      CROSS JOIN LATERAL (
                          SELECT t.* FROM tasks t
                           WHERE t.state = 'queued' AND NOT t.parked AND t.queue = v_q AND (t.pool IS NULL OR t.pool <> ALL (p_full))
                             AND required_fine(t.required) = v_fb AND t.priority >= g.priority AND t.priority <= g.priority
                           ORDER BY t.priority, t.id LIMIT v_walk) t)
                    LIMIT v_walk) w
             WHERE (w.k1, w.id) < (v_bk, v_bid);
            IF v_fid IS NOT NULL THEN
                SELECT t.id, CASE WHEN p_descending THEN -t.priority::bigint ELSE t.priority END, t.required, t.pool
                  INTO id, k1, required, pool
                  FROM tasks t WHERE t.id = v_fid;
                v_bk := k1;
                v_bid := id;
                EXIT;  -- the first fit in claim order: nothing before it fits
            END IF;
            -- Ascending, a short walk reached the best so far (or the end).
            EXIT WHEN v_walked < v_walk AND NOT p_descending;
            IF v_walked > 0 THEN
                v_wk := v_last[1];
                v_wid := v_last[2];
                v_wp := CASE WHEN p_descending THEN (-v_wk)::integer ELSE v_wk::integer END;
            ELSIF p_descending AND v_walked = 0 THEN
                EXIT;  -- nothing left before the best in this bucket
            END IF;

            -- Visit the next distinct values of the fitting range [v_flo,
            -- p_remaining], one probe each for its best row past the walk.
            WITH RECURSIVE v(r, n) AS (
                SELECT (SELECT t.required FROM tasks t
                         WHERE t.state = 'queued' AND NOT t.parked AND t.queue = v_q
                           AND t.required > v_r AND t.required <= p_remaining
                         ORDER BY t.required LIMIT 1), 1
                UNION ALL
                SELECT (SELECT t.required FROM tasks t
                         WHERE t.state = 'queued' AND NOT t.parked AND t.queue = v_q
                           AND t.required > v.r AND t.required <= p_remaining
                         ORDER BY t.required LIMIT 1), v.n + 1
                  FROM v WHERE v.r IS NOT NULL AND v.n < v_visit
            )
            SELECT array_agg(v.r ORDER BY v.r) INTO v_values FROM v WHERE v.r IS NOT NULL;
            v_visited := COALESCE(cardinality(v_values), 0);
            IF v_visited > 0 THEN
                v_r := v_values[v_visited];
                SELECT c.id INTO v_fid
                  FROM unnest(v_values) AS v(r) CROSS JOIN LATERAL (
                       (SELECT t.id, t.priority::bigint AS k1 FROM tasks t
                         WHERE t.state = 'queued' AND NOT t.parked AND t.queue = v_q AND (t.pool IS NULL OR t.pool <> ALL (p_full))
                           AND t.required = v.r AND NOT p_descending AND (t.priority, t.id) > (v_wp, v_wid)
                         ORDER BY t.priority, t.id LIMIT 1)
                       UNION ALL
                       (SELECT t.id, -t.priority::bigint FROM tasks t
                         WHERE t.state = 'queued' AND NOT t.parked AND t.queue = v_q AND (t.pool IS NULL OR t.pool <> ALL (p_full))
                           AND t.required = v.r AND p_descending
                           AND (t.priority, t.id) > (v_wp, v_wid) AND t.priority <= v_wp
                         ORDER BY t.priority, t.id LIMIT 1)
                       UNION ALL
                       (SELECT t.id, -t.priority::bigint
                          FROM (SELECT s.priority FROM tasks s
                                 WHERE s.state = 'queued' AND NOT s.parked AND s.queue = v_q AND (s.pool IS NULL OR s.pool <> ALL (p_full))
                                   AND s.required = v.r AND s.priority < v_wp AND p_descending
                                 ORDER BY s.priority DESC LIMIT 1) g
                         CROSS JOIN LATERAL (
                             SELECT t.* FROM tasks t
                              WHERE t.state = 'queued' AND NOT t.parked AND t.queue = v_q AND (t.pool IS NULL OR t.pool <> ALL (p_full))
                                AND t.required = v.r AND t.priority >= g.priority AND t.priority <= g.priority
                              ORDER BY t.priority, t.id LIMIT 1) t)
                       LIMIT 1) c
                 WHERE (c.k1, c.id) < (v_bk, v_bid)
                 ORDER BY c.k1, c.id LIMIT 1;
                IF v_fid IS NOT NULL THEN  -- a better bound for the walk, and a candidate
                    SELECT t.id, CASE WHEN p_descending THEN -t.priority::bigint ELSE t.priority END,
                           t.required, t.pool
                      INTO id, k1, required, pool
                      FROM tasks t WHERE t.id = v_fid;
                    v_bk := k1;
                    v_bid := id;
                END IF;
            END IF;
            EXIT WHEN v_visited < v_visit;  -- every fitting value was visited
            v_walk := v_walk * 16;
            v_visit := v_visit * 8;
        END LOOP;
    END LOOP;
END
$fn$;
