-- fit_candidate: the first claimable task after a key that fits, unlocked.
--
-- Claim order is the key (k1, id), with k1 = priority, or -priority when
-- p_descending. Returns the smallest key after (p_lk, p_lid) among queued,
-- unparked tasks of p_queues with required <= p_remaining, leaving out the
-- pools the caller already found full (p_full); other pools and row locks
-- are the caller's business (take_task). Its cost is bounded by level
-- counts, not by rows, distinct priorities or distinct required values.
--
-- The fitting range [0, p_remaining] is cut into whole buckets of four
-- nested levels, coarse to fine, plus what is left at the boundary. With
-- x = p_remaining + 1 (the first amount that does not fit):
--   classes (required_class, 1 per doubling):    [0, class(x))
--   buckets (required_bucket, 4 per doubling):   those of class(x) below x
--   mids    (required_mid, 32 per doubling):     those of bucket(x) below x
--   fines   (required_fine, 256 per doubling):   those of mid(x) below x
-- Every task of a whole bucket fits, so each is one probe of its level's
-- index for its best row: at most 32 + 3 + 7 + 7 probes (below 16, where
-- buckets are exact, 4 + 7), about 27 for an amount near a million, all in
-- one statement (version 2 made 75 + 40 for
-- the same amount, one level fewer above and one fewer between). What is
-- left is the fine bucket that holds x, 1/256 of a doubling wide, of which
-- [floor, p_remaining] fits: a walk of it in claim order (done at the first
-- fit) and a visit of its distinct fitting values in ix_tasks_fit_exact (one
-- probe each, done when all were visited) take turns with growing budgets
-- (16, 256, 4096, ... rows; 8, 64, 512, ... values), so the cost is
-- about twice the cheaper of the two. When x opens its bucket at some level,
-- the finer ranges are empty and there is no boundary to search.
--
-- Every walk bounds its rows with LIMIT and filters the upper key outside it:
-- PostgreSQL 15 cannot end an index scan on a row comparison (priority, id)
-- < (a, b) that is decided by id.
--
-- JIT is off for the call: the planner costs each generate_series at 1,000
-- rows, so the probe statement's estimate (above jit_above_cost in
-- descending order) made PostgreSQL compile it on every call, 40 ms for a
-- statement that runs in 0.3 ms.
--
-- A walk of the boundary stops at the best row found so far (version 4).
-- Rows at or after it cannot be the answer, and version 3 filtered them out
-- only after its LIMIT had counted them: where the best is in the same
-- priority as the walk (one priority, mb_half; the top one, mb_half_max),
-- a walk of 256 read up to 256 rows past it, each a heap fetch. Within the
-- best's priority the walk now bounds id by the best's (an index bound: the
-- priority is an equality there), and a descending walk does not step into
-- a priority below the best's.
--
-- A descending walk of the boundary that reads less than its budget, in
-- the best's own priority, ends the search (version 6), as an ascending one
-- always did: it read every row before the best. Version 5 visited the
-- bucket's values and walked again (a recursive statement, a probe per
-- value, a second walk): on one priority of 100,000 tasks with sizes
-- 1..1M (mb_half_max's top), a descending call cost about twice an
-- ascending one on the same rows.
--
-- Descending order reads each probe as "the rest of this priority, else the
-- highest priority below it" (two probes), since id stays ascending.
--
-- Below 16 left (version 5), every level is exact (required_bucket(r) = r),
-- so the probes are one per amount 0..p_remaining on ix_tasks_fit, in one
-- small statement. Version 4 planned and started the statement of all four
-- levels for the same probes (four branches, four indexes opened, three of
-- them for one or two probes each): on a claim of 4 over tasks that each
-- have their own priority (deadlines), 95 us of server time a call against
-- 155 us, where the whole claim + done costs about 600 us.
--
-- Each probe is written so that only its level's index can answer it in
-- order (version 7): the level leads the row comparison and the ORDER BY,
-- (level, priority, id) > (n, p, id) AND level <= n, in place of level = n
-- AND (priority, id) > (p, id). An equality makes the level a constant to
-- the planner, so any index on (priority, id) gave the same order, and where
-- statistics say a level holds one value (every task needs 1), its estimate
-- equalled the level index's: with such an index present (the benchmark's
-- naive one, or a user's own), a claim of 4 over one_size probed the empty
-- amounts 0, 2, 3 and 4 by walking every queued task, 500 ms a call.
-- Descending probes read the first row from the key and check its priority
-- outside the LIMIT: a scan cannot end on a later column of a range.
--
-- Version 8 (migration 0027): a third way through the boundary, a scan of
-- its fitting rows in value order. Where every fitting row of the boundary
-- has its own size (sizes in bytes: 1 GB available, tasks within 0.2% of it
-- on both sides, each its own priority), the walk read every too-big row
-- before the first fit and the visit paid two probes per fitting row: at
-- 200,000 tasks a claim cost 39 ms where the naive query's walk cost 17.
-- The scan reads the next rows of [floor, p_remaining] in the exact index's
-- order, (required, priority, id), in one plain statement, and keeps the
-- best of them: each value's first row is its best ascending, so a scan
-- that stops inside a value has still seen that value's best (descending, it
-- resumes at the last row read). A row read costs a small part of a probe.
-- The scan starts (16 rows), taking turns with the walk, both growing
-- fourfold; a scan whose rows repeat their values (more than 4 rows a
-- value) hands over to the visit in the same turn, which goes on as before
-- (the walk's and the visit's turns growing 16 and 8 fold). The cost stays within a small factor
-- of the cheapest of the three, but it is still the number of rows of the
-- boundary that fit, not a constant: see docs/performance.md.
--
-- Version 9 (migration 0028): p_queues NULL means every queue. Below 16
-- left, in either order, that is one probe per amount of
-- ix_tasks_fit_small_any (bucket, priority, id), an index of the tasks that
-- need less than 16 over every queue, whatever the number of queues. Its predicate adds id > 0 and
-- bucket < 16, which only these probes state, so no per-queue statement can
-- be planned on it. Any other call with p_queues NULL asks each queue that
-- has claimable tasks, as a list would.
--
-- Version 10 (migration 0042): the boundary costs less a row. Where the
-- fitting and the too-big rows of the boundary are about as many and every
-- size is its own (sizes in bytes around 1 GB, falling as id grows, the
-- newest half fitting: bytes_falling), the walk, the scan and the visit all
-- read half the bucket, and version 9 took 315 ms a claim at 1M tasks where
-- the naive query took 92 ms: its turns built an array for every row read
-- (the walk's last key, the scan's), sorted the walk's fits (array_agg ...
-- ORDER BY) and the scan's values (count(DISTINCT)), and gave the scan four
-- times the walk's rows. Now:
-- - an ascending walk with no pool known full reads one plain range of
--   ix_tasks_fit_fine (no union of four branches, no pool test);
-- - the walk's last key is max(id) of the rows in its own key, an array only
--   for a row past it; its first fit is min() over the fits alone;
-- - the scan resumes ascending at max(required), and hands over to the visit
--   when a whole window holds one value;
-- - the walk and the scan take turns of the same number of rows.
-- The last is a trade. Measured at 1M tasks (python -m bench versions,
-- three interleaved rounds), four scanned rows to one walked made
-- bytes_falling 0.60x as fast as equal turns and bytes_boundary (the fits
-- few, at the worst priorities, so the scan wins) 1.83x. Equal turns keep
-- the claim nearer the naive query where the walk wins, since the naive
-- query is a walk: a claim slower than the plain query is the worse miss.
-- Against version 9, same index: bytes_falling 3.0x (1 consumer) and 3.15x
-- (8), bytes_boundary 0.67x and 0.66x.
-- The boundary is still read row by row where nothing finer than the fine
-- level tells its rows apart: bounded by those rows, not by a constant.
--
-- Version 11 (migration 0043): the ascending walk in the best's own priority
-- takes a span of ids a turn, not a number of rows, and finds its first fit
-- with a filter. Version 10's turn counted its rows, kept their last id and
-- the first fit with aggregates over a LIMIT: about 0.45 us a row at 1M tasks,
-- where a plain index range with a filter and LIMIT 1 read its rows at about
-- 0.22 us. A span of v_walk ids holds at most v_walk rows, so a turn still
-- reads no more than the scan's; the next one starts after the span.
-- ix_tasks_fit_fine now carries required and pool (INCLUDE), so the walk and
-- the probes of the fine level read no table row where the visibility map
-- allows. Its predicate adds lease_token IS NULL, true of every queued task,
-- which only this function's fine statements state: an index that could
-- answer more columns would otherwise be chosen for other statements of the
-- claim (a first try in version 10, taken back: each listed queue's window,
-- ORDER BY priority, id LIMIT 8, planned on it with a sort, 12 to 20 s a claim).
-- Measured at 1M tasks against version 10 on its own index (python -m bench
-- versions, three interleaved rounds; 1 and 8 consumers): bytes_falling 2.14x
-- and 2.03x (now above the naive query), bytes_falling_few 1.20x and 1.26x,
-- bytes_boundary 1.07x and 1.19x, listed_bytes 1.24x and 1.35x.
--
-- Version 12 (migration 0051): a descending walk of the boundary reads a
-- window of many priorities a turn. Version 11 read the rest of the walk's
-- priority, then the next priority below it and no further, so where every
-- task has its own priority a turn advanced by one or two rows whatever its
-- budget, and the scan in value order had to read every fitting row of the
-- bucket to be sure of the best. Seen on the third random draw's r16 (one
-- queue, every task its own priority, sizes in bytes around 1 GB, 30%
-- fitting, order="max"): once the tasks too big piled up at the head past
-- the look's budget, each claim cost 13 ms where the naive query's walk cost
-- about 1. Now, once the walk's own priority is read, a turn reads the next
-- rows of the bucket backward, (priority DESC, id DESC), up to its budget.
-- Read backward, the lowest priority of a full window may have rows left
-- (lower ids, which come first in claim order): that priority is cut. A fit
-- above the cut is the first in claim order; otherwise the next turn reads
-- the cut's priority forward in id order from its start, as version 11 read
-- every priority, and then the window below it. A window that is not full
-- reached the best so far or the bucket's end, and ends the search.
-- Version 13 (migration 0052): over four queues or more, the fits are first read
-- whole when they are few (few_fits). Every level above is a probe per
-- queue, so a claim over 100 queues with no list paid about 3,000 index
-- descents and the boundary's walks queue by queue, whatever the number of
-- fits: the sixth random draw's r14 (100 queues, every task its own priority
-- of a day's seconds, sizes in bytes, 0.05% fitting, order="max") spent
-- 65 ms a call here at 200,000 tasks. few_fits reads each queue's fitting
-- rows, index only, up to a budget; read to the end, the best after the key
-- is the answer. Past the budget the levels answer as before, and the
-- session skips the read for a while (few_fits' hint).
-- Version 14 (migration 0053): over every queue, the fits are read in one
-- range of ix_tasks_fit_any_exact (required, priority, id), which has no
-- queue column, within the same budget (128 rows for each claimable queue
-- listed); version 13 read them queue by queue. The probes below 16 over
-- every queue (version 9) read the same index by required, in place of
-- ix_tasks_fit_small_any by bucket, which the migration drops: below 16 the
-- bucket is the amount.
-- Version 15 (migration 0062): the walk of the boundary takes a lead over
-- the scan when the scan says it has far to go. Equal turns spent as many
-- rows on the scan as on the walk even where the walk was bound to finish
-- first: one queue, every task its own priority, sizes in bytes within
-- 1 MB of 1 GB, 30% fitting, descending (bytes_dense_max), where the tasks
-- too big pile up at the head and the walk passes the pile while the scan
-- would have to read every fit. The scan reads the fitting rows in value
-- order, so its last turn's rows over the part of the range they covered,
-- times the part left, estimate the fitting rows it has left. The scan now
-- skips its turn while the walk's next turn keeps the walk within a lead
-- over it: an eighth of that estimate, at most 16 times the scan's rows
-- (c_lead). Both turns still grow fourfold, each when it is taken, so each
-- one's rows so far follow from its next turn's budget, with no counter.
-- Before the scan's first turn, and once the visit takes over, the turns
-- are as before. The estimate assumes the fits spread evenly: where they
-- crowd the low end of the range it says too many, and the walk reads up
-- to about 17 times the scan's rows before the scan finishes, where equal
-- turns read about as many.
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
SET jit = off
AS $fn$
DECLARE
    v_lp integer := CASE WHEN p_descending THEN (-p_lk)::integer ELSE p_lk::integer END;
    v_all boolean := p_remaining >= 2147483647;
    v_x integer := CASE WHEN p_remaining >= 2147483647 THEN 2147483647 ELSE (p_remaining + 1)::integer END;
    v_cx integer;  -- classes [0, v_cx) are whole
    v_b0 integer;  -- buckets [v_b0, v_bx)
    v_bx integer;
    v_m0 integer;  -- mids [v_m0, v_mx)
    v_mx integer;
    v_f0 integer;  -- fines [v_f0, v_fx)
    v_fx integer;
    v_lo integer;
    v_flo integer;
    v_bk bigint := 9223372036854775807;
    v_bid bigint := 9223372036854775807;
    v_q text;
    v_walked bigint;
    v_last bigint[];
    v_fid bigint;
    v_wk bigint;
    v_wid bigint;
    v_wp integer;
    v_r integer;
    v_walk bigint;
    v_end bigint;
    v_visit integer;
    v_values integer[];
    v_visited integer;
    v_scan integer;
    v_scanning boolean;
    v_rows integer;
    v_rmin bigint;
    v_rmax bigint;
    v_sbid bigint;
    v_sp integer;
    v_sid bigint;
    v_slast bigint[];
    v_sbest bigint[];
    v_an integer;        -- descending walk (version 12): rows of the walk's own priority read
    v_amax bigint;       -- their last id
    v_bpl integer;       -- the lowest priority not after the best so far
    v_kept integer;      -- rows of the window below it read
    v_klast bigint[];    -- the window's first fit in claim order
    v_cut integer;       -- the window's lowest priority
    v_wend boolean := false;  -- the walk read everything up to the best or the bucket's end
    v_few bigint[];           -- several queues: the first fit, when every fit was read (version 13)
    v_every boolean := p_queues IS NULL;  -- every queue: few_fits reads them in one range (version 14)
    c_fscan CONSTANT integer := 128;      -- few_fits' budget: rows for each queue
    c_lead CONSTANT integer := 16;        -- the walk's lead over the scan, at most, in the scan's rows (version 15)
BEGIN
    IF p_remaining < 0 THEN
        RETURN;
    END IF;
    IF p_queues IS NULL THEN
        IF p_remaining < 16 AND NOT p_descending THEN
            -- Every queue, a small amount (version 9): the probes of one
            -- queue below, over the index of every queue's small tasks.
            SELECT c.id, c.k1, c.required, c.pool INTO id, k1, required, pool
              FROM generate_series(0, p_remaining::integer) AS b(n)
             CROSS JOIN LATERAL (
                   SELECT t.id, t.priority::bigint AS k1, t.required, t.pool FROM tasks t
                    WHERE t.state = 'queued' AND NOT t.parked AND t.id > 0 AND t.required < 16
                      AND (t.pool IS NULL OR t.pool <> ALL (p_full))
                      AND (t.required, t.priority, t.id) > (b.n, v_lp, p_lid) AND t.required <= b.n
                    ORDER BY t.required, t.priority, t.id LIMIT 1) c
             ORDER BY c.k1, c.id LIMIT 1;
            RETURN;
        ELSIF p_remaining < 16 THEN
            -- Descending, the same probes over every queue's small tasks.
            SELECT c.id, c.k1, c.required, c.pool INTO id, k1, required, pool
              FROM generate_series(0, p_remaining::integer) AS b(n)
             CROSS JOIN LATERAL (
                   (SELECT t.id, -t.priority::bigint AS k1, t.required, t.pool FROM (
                       SELECT t.id, t.priority, t.required, t.pool FROM tasks t
                        WHERE t.state = 'queued' AND NOT t.parked AND t.id > 0 AND t.required < 16 AND (t.pool IS NULL OR t.pool <> ALL (p_full))
                          AND (t.required, t.priority, t.id) > (b.n, v_lp, p_lid) AND t.required <= b.n
                        ORDER BY t.required, t.priority, t.id LIMIT 1) t
                     WHERE t.priority <= v_lp)
                   UNION ALL
                   (SELECT t.id, -t.priority::bigint AS k1, t.required, t.pool
                      FROM (SELECT s.priority FROM tasks s
                             WHERE s.state = 'queued' AND NOT s.parked AND s.id > 0 AND s.required < 16 AND (s.pool IS NULL OR s.pool <> ALL (p_full))
                               AND (s.required, s.priority) < (b.n, v_lp) AND s.required >= b.n
                             ORDER BY s.required DESC, s.priority DESC LIMIT 1) g
                     CROSS JOIN LATERAL (
                         SELECT t.* FROM tasks t
                          WHERE t.state = 'queued' AND NOT t.parked AND t.id > 0 AND t.required < 16 AND (t.pool IS NULL OR t.pool <> ALL (p_full))
                            AND (t.required, t.priority) >= (b.n, g.priority) AND t.required <= b.n
                          ORDER BY t.required, t.priority, t.id LIMIT 1) t
                     WHERE t.priority = g.priority)
                   LIMIT 1) c
             ORDER BY c.k1, c.id LIMIT 1;
            RETURN;
        END IF;
        p_queues := claimable_queues(NULL, NULL);
        IF p_queues IS NULL THEN
            RETURN;  -- no queue has claimable tasks
        END IF;
    END IF;
    IF cardinality(p_queues) > 3 AND NOT v_all THEN
        -- 0. Four queues or more (version 13): every fit read whole when they are few.
        v_few := CASE WHEN v_every
                      THEN few_fits(NULL, p_remaining, p_lk, p_lid, p_descending, p_full, 1,
                                    c_fscan::bigint * cardinality(p_queues))
                      ELSE few_fits(p_queues, p_remaining, p_lk, p_lid, p_descending, p_full, 1) END;
        IF v_few IS NOT NULL THEN
            IF cardinality(v_few) > 0 THEN
                SELECT t.id, CASE WHEN p_descending THEN -t.priority::bigint ELSE t.priority END, t.required, t.pool
                  INTO id, k1, required, pool
                  FROM tasks t WHERE t.id = v_few[1];
            END IF;
            RETURN;
        END IF;
    END IF;
    IF p_remaining < 16 THEN
        -- Exact levels: one probe per amount that fits, no boundary to walk.
        IF NOT p_descending THEN
            SELECT c.id, c.k1, c.required, c.pool INTO id, k1, required, pool
              FROM unnest(p_queues) AS q(name)
             CROSS JOIN LATERAL generate_series(0, p_remaining::integer) AS b(n)
             CROSS JOIN LATERAL (
                   SELECT t.id, t.priority::bigint AS k1, t.required, t.pool FROM tasks t
                    WHERE t.state = 'queued' AND NOT t.parked AND t.queue = q.name AND (t.pool IS NULL OR t.pool <> ALL (p_full))
                      AND (t.bucket, t.priority, t.id) > (b.n, v_lp, p_lid) AND t.bucket <= b.n
                    ORDER BY t.bucket, t.priority, t.id LIMIT 1) c
             ORDER BY c.k1, c.id LIMIT 1;
        ELSE
            SELECT c.id, c.k1, c.required, c.pool INTO id, k1, required, pool
              FROM unnest(p_queues) AS q(name)
             CROSS JOIN LATERAL generate_series(0, p_remaining::integer) AS b(n)
             CROSS JOIN LATERAL (
                   (SELECT t.id, -t.priority::bigint AS k1, t.required, t.pool FROM (
                       SELECT t.id, t.priority, t.required, t.pool FROM tasks t
                        WHERE t.state = 'queued' AND NOT t.parked AND t.queue = q.name AND (t.pool IS NULL OR t.pool <> ALL (p_full))
                          AND (t.bucket, t.priority, t.id) > (b.n, v_lp, p_lid) AND t.bucket <= b.n
                        ORDER BY t.bucket, t.priority, t.id LIMIT 1) t
                     WHERE t.priority <= v_lp)
                   UNION ALL
                   (SELECT t.id, -t.priority::bigint AS k1, t.required, t.pool
                      FROM (SELECT s.priority FROM tasks s
                             WHERE s.state = 'queued' AND NOT s.parked AND s.queue = q.name AND (s.pool IS NULL OR s.pool <> ALL (p_full))
                               AND (s.bucket, s.priority) < (b.n, v_lp) AND s.bucket >= b.n
                             ORDER BY s.bucket DESC, s.priority DESC LIMIT 1) g
                     CROSS JOIN LATERAL (
                         SELECT t.* FROM tasks t
                          WHERE t.state = 'queued' AND NOT t.parked AND t.queue = q.name AND (t.pool IS NULL OR t.pool <> ALL (p_full))
                            AND (t.bucket, t.priority) >= (b.n, g.priority) AND t.bucket <= b.n
                          ORDER BY t.bucket, t.priority, t.id LIMIT 1) t
                     WHERE t.priority = g.priority)
                   LIMIT 1) c
             ORDER BY c.k1, c.id LIMIT 1;
        END IF;
        RETURN;
    END IF;
    IF v_all THEN
        v_cx := 32;  -- every class is whole
        v_b0 := 0; v_bx := 0; v_m0 := 0; v_mx := 0; v_f0 := 0; v_fx := 0;
    ELSE
        v_cx := required_class(v_x);
        v_lo := CASE WHEN v_cx = 0 THEN 0 ELSE 1 << (v_cx - 1) END;
        v_b0 := required_bucket(v_lo);
        v_bx := required_bucket(v_x);
        v_lo := CASE WHEN v_bx < 16 THEN v_bx ELSE (4 + v_bx % 4) << (v_bx / 4 - 2) END;
        v_m0 := required_mid(v_lo);
        v_mx := required_mid(v_x);
        v_lo := CASE WHEN v_mx < 64 THEN v_mx ELSE ((v_mx - 64) % 32 + 32) << ((v_mx - 64) / 32 + 1) END;
        v_f0 := required_fine(v_lo);
        v_fx := required_fine(v_x);
    END IF;

    -- 1. Every whole bucket of every level: one probe each, one statement.
    IF NOT p_descending THEN
        SELECT c.id, c.k1, c.required, c.pool INTO id, k1, required, pool
          FROM unnest(p_queues) AS q(name)
         CROSS JOIN LATERAL (
               SELECT p.* FROM generate_series(0, v_cx - 1) AS b(n) CROSS JOIN LATERAL (
                   SELECT t.id, t.priority::bigint AS k1, t.required, t.pool FROM tasks t
                    WHERE t.state = 'queued' AND NOT t.parked AND t.queue = q.name AND (t.pool IS NULL OR t.pool <> ALL (p_full))
                      AND (required_class(t.required), t.priority, t.id) > (b.n, v_lp, p_lid) AND required_class(t.required) <= b.n
                    ORDER BY required_class(t.required), t.priority, t.id LIMIT 1) p
               UNION ALL
               SELECT p.* FROM generate_series(v_b0, v_bx - 1) AS b(n) CROSS JOIN LATERAL (
                   SELECT t.id, t.priority::bigint AS k1, t.required, t.pool FROM tasks t
                    WHERE t.state = 'queued' AND NOT t.parked AND t.queue = q.name AND (t.pool IS NULL OR t.pool <> ALL (p_full))
                      AND (t.bucket, t.priority, t.id) > (b.n, v_lp, p_lid) AND t.bucket <= b.n
                    ORDER BY t.bucket, t.priority, t.id LIMIT 1) p
               UNION ALL
               SELECT p.* FROM generate_series(v_m0, v_mx - 1) AS b(n) CROSS JOIN LATERAL (
                   SELECT t.id, t.priority::bigint AS k1, t.required, t.pool FROM tasks t
                    WHERE t.state = 'queued' AND NOT t.parked AND t.queue = q.name AND (t.pool IS NULL OR t.pool <> ALL (p_full))
                      AND (required_mid(t.required), t.priority, t.id) > (b.n, v_lp, p_lid) AND required_mid(t.required) <= b.n
                    ORDER BY required_mid(t.required), t.priority, t.id LIMIT 1) p
               UNION ALL
               SELECT p.* FROM generate_series(v_f0, v_fx - 1) AS b(n) CROSS JOIN LATERAL (
                   SELECT t.id, t.priority::bigint AS k1, t.required, t.pool FROM tasks t
                    WHERE t.state = 'queued' AND NOT t.parked AND t.lease_token IS NULL AND t.queue = q.name AND (t.pool IS NULL OR t.pool <> ALL (p_full))
                      AND (required_fine(t.required), t.priority, t.id) > (b.n, v_lp, p_lid) AND required_fine(t.required) <= b.n
                    ORDER BY required_fine(t.required), t.priority, t.id LIMIT 1) p
           ) c
         ORDER BY c.k1, c.id LIMIT 1;
    ELSE
        SELECT c.id, c.k1, c.required, c.pool INTO id, k1, required, pool
          FROM unnest(p_queues) AS q(name)
         CROSS JOIN LATERAL (
               SELECT p.* FROM generate_series(0, v_cx - 1) AS b(n) CROSS JOIN LATERAL (
                   (SELECT t.id, -t.priority::bigint AS k1, t.required, t.pool FROM (
                       SELECT t.id, t.priority, t.required, t.pool FROM tasks t
                        WHERE t.state = 'queued' AND NOT t.parked AND t.queue = q.name AND (t.pool IS NULL OR t.pool <> ALL (p_full))
                          AND (required_class(t.required), t.priority, t.id) > (b.n, v_lp, p_lid) AND required_class(t.required) <= b.n
                        ORDER BY required_class(t.required), t.priority, t.id LIMIT 1) t
                     WHERE t.priority <= v_lp)
                   UNION ALL
                   (SELECT t.id, -t.priority::bigint AS k1, t.required, t.pool
                      FROM (SELECT s.priority FROM tasks s
                             WHERE s.state = 'queued' AND NOT s.parked AND s.queue = q.name AND (s.pool IS NULL OR s.pool <> ALL (p_full))
                               AND (required_class(s.required), s.priority) < (b.n, v_lp) AND required_class(s.required) >= b.n
                             ORDER BY required_class(s.required) DESC, s.priority DESC LIMIT 1) g
                     CROSS JOIN LATERAL (
                         SELECT t.* FROM tasks t
                          WHERE t.state = 'queued' AND NOT t.parked AND t.queue = q.name AND (t.pool IS NULL OR t.pool <> ALL (p_full))
                            AND (required_class(t.required), t.priority) >= (b.n, g.priority) AND required_class(t.required) <= b.n
                          ORDER BY required_class(t.required), t.priority, t.id LIMIT 1) t
                     WHERE t.priority = g.priority)
                   LIMIT 1) p
               UNION ALL
               SELECT p.* FROM generate_series(v_b0, v_bx - 1) AS b(n) CROSS JOIN LATERAL (
                   (SELECT t.id, -t.priority::bigint AS k1, t.required, t.pool FROM (
                       SELECT t.id, t.priority, t.required, t.pool FROM tasks t
                        WHERE t.state = 'queued' AND NOT t.parked AND t.queue = q.name AND (t.pool IS NULL OR t.pool <> ALL (p_full))
                          AND (t.bucket, t.priority, t.id) > (b.n, v_lp, p_lid) AND t.bucket <= b.n
                        ORDER BY t.bucket, t.priority, t.id LIMIT 1) t
                     WHERE t.priority <= v_lp)
                   UNION ALL
                   (SELECT t.id, -t.priority::bigint AS k1, t.required, t.pool
                      FROM (SELECT s.priority FROM tasks s
                             WHERE s.state = 'queued' AND NOT s.parked AND s.queue = q.name AND (s.pool IS NULL OR s.pool <> ALL (p_full))
                               AND (s.bucket, s.priority) < (b.n, v_lp) AND s.bucket >= b.n
                             ORDER BY s.bucket DESC, s.priority DESC LIMIT 1) g
                     CROSS JOIN LATERAL (
                         SELECT t.* FROM tasks t
                          WHERE t.state = 'queued' AND NOT t.parked AND t.queue = q.name AND (t.pool IS NULL OR t.pool <> ALL (p_full))
                            AND (t.bucket, t.priority) >= (b.n, g.priority) AND t.bucket <= b.n
                          ORDER BY t.bucket, t.priority, t.id LIMIT 1) t
                     WHERE t.priority = g.priority)
                   LIMIT 1) p
               UNION ALL
               SELECT p.* FROM generate_series(v_m0, v_mx - 1) AS b(n) CROSS JOIN LATERAL (
                   (SELECT t.id, -t.priority::bigint AS k1, t.required, t.pool FROM (
                       SELECT t.id, t.priority, t.required, t.pool FROM tasks t
                        WHERE t.state = 'queued' AND NOT t.parked AND t.queue = q.name AND (t.pool IS NULL OR t.pool <> ALL (p_full))
                          AND (required_mid(t.required), t.priority, t.id) > (b.n, v_lp, p_lid) AND required_mid(t.required) <= b.n
                        ORDER BY required_mid(t.required), t.priority, t.id LIMIT 1) t
                     WHERE t.priority <= v_lp)
                   UNION ALL
                   (SELECT t.id, -t.priority::bigint AS k1, t.required, t.pool
                      FROM (SELECT s.priority FROM tasks s
                             WHERE s.state = 'queued' AND NOT s.parked AND s.queue = q.name AND (s.pool IS NULL OR s.pool <> ALL (p_full))
                               AND (required_mid(s.required), s.priority) < (b.n, v_lp) AND required_mid(s.required) >= b.n
                             ORDER BY required_mid(s.required) DESC, s.priority DESC LIMIT 1) g
                     CROSS JOIN LATERAL (
                         SELECT t.* FROM tasks t
                          WHERE t.state = 'queued' AND NOT t.parked AND t.queue = q.name AND (t.pool IS NULL OR t.pool <> ALL (p_full))
                            AND (required_mid(t.required), t.priority) >= (b.n, g.priority) AND required_mid(t.required) <= b.n
                          ORDER BY required_mid(t.required), t.priority, t.id LIMIT 1) t
                     WHERE t.priority = g.priority)
                   LIMIT 1) p
               UNION ALL
               SELECT p.* FROM generate_series(v_f0, v_fx - 1) AS b(n) CROSS JOIN LATERAL (
                   (SELECT t.id, -t.priority::bigint AS k1, t.required, t.pool FROM (
                       SELECT t.id, t.priority, t.required, t.pool FROM tasks t
                        WHERE t.state = 'queued' AND NOT t.parked AND t.lease_token IS NULL AND t.queue = q.name AND (t.pool IS NULL OR t.pool <> ALL (p_full))
                          AND (required_fine(t.required), t.priority, t.id) > (b.n, v_lp, p_lid) AND required_fine(t.required) <= b.n
                        ORDER BY required_fine(t.required), t.priority, t.id LIMIT 1) t
                     WHERE t.priority <= v_lp)
                   UNION ALL
                   (SELECT t.id, -t.priority::bigint AS k1, t.required, t.pool
                      FROM (SELECT s.priority FROM tasks s
                             WHERE s.state = 'queued' AND NOT s.parked AND s.lease_token IS NULL AND s.queue = q.name AND (s.pool IS NULL OR s.pool <> ALL (p_full))
                               AND (required_fine(s.required), s.priority) < (b.n, v_lp) AND required_fine(s.required) >= b.n
                             ORDER BY required_fine(s.required) DESC, s.priority DESC LIMIT 1) g
                     CROSS JOIN LATERAL (
                         SELECT t.* FROM tasks t
                          WHERE t.state = 'queued' AND NOT t.parked AND t.lease_token IS NULL AND t.queue = q.name AND (t.pool IS NULL OR t.pool <> ALL (p_full))
                            AND (required_fine(t.required), t.priority) >= (b.n, g.priority) AND required_fine(t.required) <= b.n
                          ORDER BY required_fine(t.required), t.priority, t.id LIMIT 1) t
                     WHERE t.priority = g.priority)
                   LIMIT 1) p
           ) c
         ORDER BY c.k1, c.id LIMIT 1;
    END IF;
    IF id IS NOT NULL THEN
        v_bk := k1;
        v_bid := id;
    END IF;
    IF v_all THEN
        RETURN;
    END IF;
    v_flo := CASE WHEN v_fx < 512 THEN v_fx ELSE ((v_fx % 256) + 256) << (v_fx / 256 - 1) END;
    IF v_flo > p_remaining THEN
        RETURN;  -- x opens its fine bucket: every fitting amount was in a whole bucket
    END IF;

    -- 2. The fine bucket that holds x, queue by queue, for rows better than
    -- the best so far: walk and visit take turns with growing budgets (a
    -- walked row, read in index order, costs several times less than a
    -- visited value's probe), so the cost stays within a small factor of the
    -- cheaper of the two.
    FOREACH v_q IN ARRAY p_queues LOOP
        v_wk := p_lk;
        v_wid := p_lid;
        v_wp := v_lp;
        v_r := v_flo - 1;
        v_walk := 16;
        v_visit := 8;
        v_scan := 16;  -- as many rows as the walk's turn (version 10; 64 before)
        v_scanning := true;
        v_sp := 2147483647;  -- the scan resumes after (v_r, v_sp, v_sid): from v_flo at first
        v_sid := 9223372036854775807;
        v_wend := false;
        LOOP
            -- Walk the fine bucket in claim order from where the last walk stopped.
            -- Scalar aggregates where they do (version 10): the rows of the
            -- walk's own key k1 come first and in id order, so their last is
            -- max(id); an array is built only for a row past that key, and
            -- for a fit. Ascending with no pool known full, the range is read
            -- by one plain index range scan (no union, no pool test), the
            -- common case and the one the naive query is measured against.
            IF NOT p_descending AND cardinality(p_full) = 0 AND v_wp = v_bk THEN
                -- In the best's own priority (version 11): a turn is a span of
                -- v_walk ids, which holds at most as many rows as the scan's
                -- turn reads, and its first fit is found by a filter on the
                -- index's own copy of required, with nothing counted or
                -- aggregated over the rows passed (about half the cost a row
                -- of a bounded window with aggregates).
                v_end := CASE WHEN v_bid - GREATEST(v_wid, 0) <= v_walk THEN v_bid ELSE GREATEST(v_wid, 0) + v_walk END;
                SELECT t.id INTO v_fid FROM tasks t
                 WHERE t.state = 'queued' AND NOT t.parked AND t.lease_token IS NULL AND t.queue = v_q
                   AND required_fine(t.required) = v_fx
                   AND t.priority = v_wp AND t.id > v_wid AND t.id < v_end AND t.required <= p_remaining
                 ORDER BY t.priority, t.id LIMIT 1;
                v_last := ARRAY[v_wk, v_end - 1];
                v_walked := CASE WHEN v_end = v_bid THEN 0 ELSE v_walk END;  -- 0: it reached the best
            ELSIF p_descending THEN
                -- Descending (version 12). First the rest of the walk's own
                -- priority, in id order, before the best when it is the best's.
                SELECT count(*), max(w.id), min(w.id) FILTER (WHERE w.required <= p_remaining)
                  INTO v_an, v_amax, v_fid
                  FROM (SELECT t.id, t.required FROM tasks t
                         WHERE t.state = 'queued' AND NOT t.parked AND t.lease_token IS NULL AND t.queue = v_q
                           AND (t.pool IS NULL OR t.pool <> ALL (p_full))
                           AND required_fine(t.required) = v_fx AND t.priority = v_wp AND t.id > v_wid
                           AND t.id < CASE WHEN -(v_wp::bigint) = v_bk THEN v_bid ELSE 9223372036854775807 END
                         ORDER BY t.priority, t.id LIMIT v_walk) w
                 WHERE -(v_wp::bigint) <= v_bk;
                v_walked := v_an;
                v_last := ARRAY[-(v_wp::bigint), v_amax];
                IF v_fid IS NULL AND v_an < v_walk AND -(v_wp::bigint) < v_bk THEN
                    -- That priority is spent: the window below it, read backward
                    -- down to the best's priority, with plain aggregates (a
                    -- first cut numbered the window's rows with window
                    -- functions: per row read, about three times the scan's
                    -- cost). Read backward, a full window's lowest priority
                    -- (its cut) may go on below it with lower ids, which come
                    -- first in claim order; every priority above the cut was
                    -- read whole. Scalar bounds under an equality on the level:
                    -- PostgreSQL 15 does not end a backward scan on a row
                    -- comparison decided by its second column, and a bound at
                    -- the best's priority read on to the bucket's end (10 ms a
                    -- claim on r16 in a first cut).
                    v_bpl := CASE WHEN v_bk >= 2147483648 THEN -2147483648 ELSE (-v_bk)::integer END;
                    SELECT count(*), min(w.priority),
                           min(ARRAY[-w.priority::bigint, w.id])
                               FILTER (WHERE w.required <= p_remaining AND (-(w.priority::bigint), w.id) < (v_bk, v_bid))
                      INTO v_kept, v_cut, v_klast
                      FROM (SELECT t.id, t.priority, t.required FROM tasks t
                             WHERE t.state = 'queued' AND NOT t.parked AND t.lease_token IS NULL
                               AND t.queue = v_q AND (t.pool IS NULL OR t.pool <> ALL (p_full))
                               AND required_fine(t.required) = v_fx
                               AND t.priority < v_wp AND t.priority >= v_bpl
                             ORDER BY required_fine(t.required) DESC, t.priority DESC, t.id DESC
                             LIMIT v_walk) w;
                    IF v_klast IS NOT NULL AND (v_kept < v_walk OR -v_klast[1] > v_cut) THEN
                        v_fid := v_klast[2];  -- every row of its priority was read: the first fit
                    ELSIF v_kept < v_walk THEN
                        v_wend := true;  -- it read down to the best or the bucket's end: no fit
                    ELSE
                        -- Full: go on from the cut's first row, read forward.
                        v_walked := v_walk;
                        v_last := ARRAY[-(v_cut::bigint), 0];
                    END IF;
                END IF;
            ELSIF NOT p_descending AND cardinality(p_full) = 0 THEN
                SELECT count(*),
                       COALESCE(max(ARRAY[w.priority::bigint, w.id]) FILTER (WHERE w.priority <> v_wp),
                                ARRAY[v_wk, max(w.id)]),
                       (min(ARRAY[w.priority::bigint, w.id]) FILTER (WHERE w.required <= p_remaining))[2]
                  INTO v_walked, v_last, v_fid
                  FROM (SELECT t.id, t.priority, t.required FROM tasks t
                         WHERE t.state = 'queued' AND NOT t.parked AND t.lease_token IS NULL AND t.queue = v_q
                           AND required_fine(t.required) = v_fx
                           AND (t.priority, t.id) > (v_wp, v_wid) AND t.priority <= v_bk
                         ORDER BY t.priority, t.id LIMIT v_walk) w
                 WHERE (w.priority, w.id) < (v_bk, v_bid);
            ELSE
                -- Ascending with pools known full: the best's own priority, or
                -- on from the walk's key (version 12 took the descending
                -- branches out of this union: the branch above walks them).
                SELECT count(*),
                       COALESCE(max(ARRAY[w.k1, w.id]) FILTER (WHERE w.k1 <> v_wk), ARRAY[v_wk, max(w.id)]),
                       (min(ARRAY[w.k1, w.id]) FILTER (WHERE w.required <= p_remaining))[2]
                  INTO v_walked, v_last, v_fid
                  FROM ((SELECT t.id, t.priority::bigint AS k1, t.required FROM tasks t
                          WHERE t.state = 'queued' AND NOT t.parked AND t.lease_token IS NULL AND t.queue = v_q AND (t.pool IS NULL OR t.pool <> ALL (p_full))
                            AND required_fine(t.required) = v_fx AND NOT p_descending AND v_wp = v_bk
                            AND t.priority = v_wp AND t.id > v_wid AND t.id < v_bid
                          ORDER BY t.priority, t.id LIMIT v_walk)
                        UNION ALL
                        (SELECT t.id, t.priority::bigint AS k1, t.required FROM tasks t
                          WHERE t.state = 'queued' AND NOT t.parked AND t.lease_token IS NULL AND t.queue = v_q AND (t.pool IS NULL OR t.pool <> ALL (p_full))
                            AND required_fine(t.required) = v_fx AND NOT p_descending AND v_wp <> v_bk
                            AND (t.priority, t.id) > (v_wp, v_wid) AND t.priority <= v_bk
                          ORDER BY t.priority, t.id LIMIT v_walk)
                        LIMIT v_walk) w
                 WHERE (w.k1, w.id) < (v_bk, v_bid);
            END IF;
            IF v_fid IS NOT NULL THEN
                SELECT t.id, CASE WHEN p_descending THEN -t.priority::bigint ELSE t.priority END, t.required, t.pool
                  INTO id, k1, required, pool
                  FROM tasks t WHERE t.id = v_fid;
                v_bk := k1;
                v_bid := id;
                EXIT;  -- the first fit in claim order: nothing before it fits
            END IF;
            EXIT WHEN v_wend;  -- descending (version 12): the walk read every row before the best
            -- Ascending, a short walk reached the best so far (or the end).
            -- A walk that read less than its budget read every row before the
            -- best: ascending always; descending when the best is in the
            -- walk's own priority (version 6), where the walk is bounded by
            -- the best's id and steps into no lower priority.
            EXIT WHEN v_walked < v_walk AND (NOT p_descending OR -(v_wp::bigint) = v_bk);
            IF v_walked > 0 THEN
                v_wk := v_last[1];
                v_wid := v_last[2];
                v_wp := CASE WHEN p_descending THEN (-v_wk)::integer ELSE v_wk::integer END;
            ELSIF p_descending AND v_walked = 0 THEN
                EXIT;  -- nothing left before the best in this bucket
            END IF;

            IF v_scanning AND v_rmax > v_rmin
               AND (16 * v_walk - 16) / 3 <= (v_scan - 16) / 3
                                             + LEAST(v_rows * (p_remaining - v_rmax) / NULLIF(v_rmax - v_rmin, 0) / 8,
                                                     c_lead * ((v_scan - 16) / 3)) THEN
                -- The walk's lead (version 15). While scanning, the walk has read
                -- (4 * v_walk - 16) / 3 rows (16, 64, ... up to this turn) and the
                -- scan (v_scan - 16) / 3 (up to its last turn). If the walk's next
                -- turn keeps it within an eighth of the fitting rows the scan has
                -- left (its last turn's rows over the values they covered, times
                -- the values left), and within c_lead times the scan's rows, the
                -- walk takes it alone.
                v_walk := v_walk * 4;
                CONTINUE;
            END IF;
            IF v_scanning THEN
                -- Scan the next rows of the fitting range [v_flo, p_remaining]
                -- in value order (version 8), keeping the best one past the
                -- walk and before the best so far; pools are filtered after
                -- the LIMIT, so it counts the rows read, not the ones kept.
                IF cardinality(p_full) = 0 THEN
                    -- No pool known full: the index answers alone, with no heap fetch
                    -- where the visibility map allows.
                    SELECT count(*), min(s.required), max(s.required),
                           max(ARRAY[s.required, s.priority, s.id]) FILTER (WHERE p_descending),
                           min(ARRAY[s.k1, s.id]) FILTER (WHERE (s.k1, s.id) > (v_wk, v_wid) AND s.k1 < v_bk),
                           min(s.id) FILTER (WHERE (s.k1, s.id) > (v_wk, v_wid) AND s.k1 = v_bk AND s.id < v_bid)
                      INTO v_rows, v_rmin, v_rmax, v_slast, v_sbest, v_sbid
                      FROM (SELECT t.id, t.required::bigint AS required, t.priority::bigint AS priority,
                                   CASE WHEN p_descending THEN -t.priority::bigint ELSE t.priority::bigint END AS k1
                              FROM tasks t
                             WHERE t.state = 'queued' AND NOT t.parked AND t.queue = v_q
                               AND (t.required, t.priority, t.id) > (v_r, v_sp, v_sid) AND t.required <= p_remaining
                             ORDER BY t.required, t.priority, t.id LIMIT v_scan) s;
                ELSE
                    SELECT count(*), min(s.required), max(s.required),
                           max(ARRAY[s.required, s.priority, s.id]) FILTER (WHERE p_descending),
                           min(ARRAY[s.k1, s.id]) FILTER (WHERE (s.k1, s.id) > (v_wk, v_wid) AND s.k1 < v_bk
                                                            AND (s.pool IS NULL OR s.pool <> ALL (p_full))),
                           min(s.id) FILTER (WHERE (s.k1, s.id) > (v_wk, v_wid) AND s.k1 = v_bk AND s.id < v_bid
                                               AND (s.pool IS NULL OR s.pool <> ALL (p_full)))
                      INTO v_rows, v_rmin, v_rmax, v_slast, v_sbest, v_sbid
                      FROM (SELECT t.id, t.required::bigint AS required, t.priority::bigint AS priority, t.pool,
                                   CASE WHEN p_descending THEN -t.priority::bigint ELSE t.priority::bigint END AS k1
                              FROM tasks t
                             WHERE t.state = 'queued' AND NOT t.parked AND t.queue = v_q
                               AND (t.required, t.priority, t.id) > (v_r, v_sp, v_sid) AND t.required <= p_remaining
                             ORDER BY t.required, t.priority, t.id LIMIT v_scan) s;
                END IF;
                -- A row better than the best in another key beats every row
                -- in the best's own key, of which min(id) is the best (no
                -- array for them: where one priority holds the boundary, none).
                IF v_sbest IS NULL AND v_sbid IS NOT NULL THEN
                    v_sbest := ARRAY[v_bk, v_sbid];
                END IF;
                IF v_sbest IS NOT NULL THEN
                    SELECT t.id, CASE WHEN p_descending THEN -t.priority::bigint ELSE t.priority END, t.required, t.pool
                      INTO id, k1, required, pool
                      FROM tasks t WHERE t.id = v_sbest[2];
                    v_bk := k1;
                    v_bid := id;
                END IF;
                EXIT WHEN v_rows < v_scan;  -- every fitting row was read
                IF p_descending THEN
                    -- The last value read may go on with higher priorities: resume inside it.
                    v_r := v_slast[1]::integer;
                    v_sp := v_slast[2]::integer;
                    v_sid := v_slast[3];
                ELSE
                    v_r := v_rmax::integer;  -- its first row, its best, was read
                END IF;
                IF v_rmin < v_rmax THEN
                    v_walk := v_walk * 4;
                    v_scan := v_scan * 4;
                    CONTINUE;
                END IF;
                -- A whole window of one value (version 10; before, more than
                -- four rows a value, counted with count(DISTINCT), a sort of
                -- the window): one probe per value costs less than its rows.
                -- The visit takes this turn, and the scan no more.
                v_scanning := false;
                IF p_descending THEN
                    v_r := v_r - 1;  -- visit the value the scan stopped in again
                END IF;
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
                           AND NOT p_descending AND (t.required, t.priority, t.id) > (v.r, v_wp, v_wid) AND t.required <= v.r
                         ORDER BY t.required, t.priority, t.id LIMIT 1)
                       UNION ALL
                       (SELECT t.id, -t.priority::bigint FROM (
                           SELECT t.id, t.priority FROM tasks t
                            WHERE t.state = 'queued' AND NOT t.parked AND t.queue = v_q AND (t.pool IS NULL OR t.pool <> ALL (p_full))
                              AND p_descending AND (t.required, t.priority, t.id) > (v.r, v_wp, v_wid) AND t.required <= v.r
                            ORDER BY t.required, t.priority, t.id LIMIT 1) t
                         WHERE t.priority <= v_wp)
                       UNION ALL
                       (SELECT t.id, -t.priority::bigint
                          FROM (SELECT s.priority FROM tasks s
                                 WHERE s.state = 'queued' AND NOT s.parked AND s.queue = v_q AND (s.pool IS NULL OR s.pool <> ALL (p_full))
                                   AND (s.required, s.priority) < (v.r, v_wp) AND s.required >= v.r AND p_descending
                                 ORDER BY s.required DESC, s.priority DESC LIMIT 1) g
                         CROSS JOIN LATERAL (
                             SELECT t.* FROM tasks t
                              WHERE t.state = 'queued' AND NOT t.parked AND t.queue = v_q AND (t.pool IS NULL OR t.pool <> ALL (p_full))
                                AND (t.required, t.priority) >= (v.r, g.priority) AND t.required <= v.r
                              ORDER BY t.required, t.priority, t.id LIMIT 1) t
                         WHERE t.priority = g.priority)
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
