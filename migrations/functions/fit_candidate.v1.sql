-- fit_candidate: the first claimable task after a key that fits, unlocked.
--
-- Claim order is the key (k1, id), with k1 = priority, or -priority when
-- p_descending. Returns the smallest key after (p_lk, p_lid) among queued,
-- unparked tasks of p_queues with required <= p_remaining, leaving out the
-- pools the caller already found full (p_full); other pools and row locks
-- are the caller's business (take_task). Its cost is bounded by the
-- bucket count, not by rows, distinct priorities or distinct required values:
--
-- 1. Every bucket below the one that holds p_remaining (see required_bucket)
--    fits whole, so its best row is one probe of ix_tasks_fit
--    (queue, bucket, priority, id): at most 124 probes, one per bucket.
-- 2. The boundary bucket holds tasks that fit and tasks that do not. Only
--    rows better than the best of step 1 matter. First a short walk of the
--    bucket in claim order (c_walk rows): enough when fitting rows are not
--    rare there. Else the distinct required values of the bucket's fitting
--    range [bucket floor, p_remaining] are visited in ix_tasks_fit_exact
--    (queue, required, priority, id), one probe each for the best row of a
--    value: cheap exactly when the walk was not, since the rows that do not
--    fit lie above p_remaining and are never visited.
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
    c_walk CONSTANT integer := 64;
    v_lp integer := CASE WHEN p_descending THEN (-p_lk)::integer ELSE p_lk::integer END;
    v_bb integer := CASE WHEN p_remaining >= 2147483647 THEN 124 ELSE required_bucket(p_remaining::integer) END;
    v_lo integer;
    v_bk bigint := 9223372036854775807;
    v_bid bigint := 9223372036854775807;
    v_q text;
    v_walked integer;
    v_before integer;
    v_fid bigint;
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

    -- 2. The boundary bucket, queue by queue, for rows better than the best so far.
    v_lo := CASE WHEN v_bb < 16 THEN v_bb ELSE (4 + v_bb % 4) << (v_bb / 4 - 2) END;
    FOREACH v_q IN ARRAY p_queues LOOP
        -- 2a. A short walk in claim order.
        SELECT count(*), count(*) FILTER (WHERE (w.k1, w.id) < (v_bk, v_bid)),
               (array_agg(w.id ORDER BY w.k1, w.id)
                    FILTER (WHERE w.required <= p_remaining AND (w.k1, w.id) < (v_bk, v_bid)))[1]
          INTO v_walked, v_before, v_fid
          FROM ((SELECT t.id, CASE WHEN p_descending THEN -t.priority::bigint ELSE t.priority END AS k1, t.required
                   FROM tasks t
                  WHERE t.state = 'queued' AND NOT t.parked AND t.queue = v_q AND (t.pool IS NULL OR t.pool <> ALL (p_full)) AND t.bucket = v_bb
                    AND NOT p_descending AND (t.priority, t.id) > (v_lp, p_lid)
                  ORDER BY t.priority, t.id LIMIT c_walk)
                UNION ALL
                (SELECT t.id, -t.priority::bigint, t.required FROM tasks t
                  WHERE t.state = 'queued' AND NOT t.parked AND t.queue = v_q AND (t.pool IS NULL OR t.pool <> ALL (p_full)) AND t.bucket = v_bb
                    AND p_descending AND (t.priority, t.id) > (v_lp, p_lid) AND t.priority <= v_lp
                  ORDER BY t.priority, t.id LIMIT c_walk)
                UNION ALL
                (SELECT t.id, -t.priority::bigint, t.required
                  FROM (SELECT s.priority FROM tasks s WHERE s.state = 'queued' AND NOT s.parked AND s.queue = v_q AND s.bucket = v_bb AND s.priority < v_lp AND (s.pool IS NULL OR s.pool <> ALL (p_full)) AND p_descending ORDER BY s.priority DESC LIMIT 1) g
                  CROSS JOIN LATERAL (
                      SELECT t.* FROM tasks t
                       WHERE t.state = 'queued' AND NOT t.parked AND t.queue = v_q AND (t.pool IS NULL OR t.pool <> ALL (p_full)) AND t.bucket = v_bb AND p_descending
                         AND t.priority >= g.priority AND t.priority <= g.priority
                       ORDER BY t.priority, t.id LIMIT c_walk) t)
                LIMIT c_walk) w;

        -- 2b. The walk settled nothing: visit the fitting range's distinct values.
        IF v_fid IS NULL AND v_before = v_walked AND (v_walked = c_walk OR p_descending) THEN
            WITH RECURSIVE v(r) AS (
                SELECT (SELECT t.required FROM tasks t
                         WHERE t.state = 'queued' AND NOT t.parked AND t.queue = v_q AND (t.pool IS NULL OR t.pool <> ALL (p_full))
                           AND t.required >= v_lo AND t.required <= p_remaining
                         ORDER BY t.required LIMIT 1)
                UNION ALL
                SELECT (SELECT t.required FROM tasks t
                         WHERE t.state = 'queued' AND NOT t.parked AND t.queue = v_q AND (t.pool IS NULL OR t.pool <> ALL (p_full))
                           AND t.required > v.r AND t.required <= p_remaining
                         ORDER BY t.required LIMIT 1)
                  FROM v WHERE v.r IS NOT NULL
            )
            SELECT c.id INTO v_fid
              FROM v CROSS JOIN LATERAL (
                   (SELECT t.id, t.priority::bigint AS k1 FROM tasks t
                     WHERE t.state = 'queued' AND NOT t.parked AND t.queue = v_q AND (t.pool IS NULL OR t.pool <> ALL (p_full)) AND t.required = v.r
                       AND NOT p_descending AND (t.priority, t.id) > (v_lp, p_lid)
                     ORDER BY t.priority, t.id LIMIT 1)
                   UNION ALL
                   (SELECT t.id, -t.priority::bigint FROM tasks t
                     WHERE t.state = 'queued' AND NOT t.parked AND t.queue = v_q AND (t.pool IS NULL OR t.pool <> ALL (p_full)) AND t.required = v.r
                       AND p_descending AND (t.priority, t.id) > (v_lp, p_lid) AND t.priority <= v_lp
                     ORDER BY t.priority, t.id LIMIT 1)
                   UNION ALL
                   (SELECT t.id, -t.priority::bigint
                     FROM (SELECT s.priority FROM tasks s WHERE s.state = 'queued' AND NOT s.parked AND s.queue = v_q AND s.required = v.r AND s.priority < v_lp AND (s.pool IS NULL OR s.pool <> ALL (p_full)) AND p_descending ORDER BY s.priority DESC LIMIT 1) g
                     CROSS JOIN LATERAL (
                         SELECT t.* FROM tasks t
                          WHERE t.state = 'queued' AND NOT t.parked AND t.queue = v_q AND (t.pool IS NULL OR t.pool <> ALL (p_full)) AND t.required = v.r AND p_descending
                            AND t.priority >= g.priority AND t.priority <= g.priority
                          ORDER BY t.priority, t.id LIMIT 1) t)
                   LIMIT 1) c
             WHERE v.r IS NOT NULL AND (c.k1, c.id) < (v_bk, v_bid)
             ORDER BY c.k1, c.id LIMIT 1;
        END IF;

        IF v_fid IS NOT NULL THEN
            SELECT t.id, CASE WHEN p_descending THEN -t.priority::bigint ELSE t.priority END, t.required, t.pool
              INTO id, k1, required, pool
              FROM tasks t WHERE t.id = v_fid;
            v_bk := k1;
            v_bid := id;
        END IF;
    END LOOP;
END
$fn$;
