-- park_rows: park the given queued tasks whose pool is full, and the rows
-- right after them in claim order whose pool is full, unless the pool had
-- room in the last second; after a claim that took nothing (p_empty), the
-- fitting rows of those pools.
--
-- A claim passes the rows it walked past because their pool was full. Their
-- pools are locked first (FOR UPDATE SKIP LOCKED, and only those still full
-- under the lock), so no release can free a slot before this transaction
-- ends: a task is never parked in a pool with room. Rows busy elsewhere are
-- skipped, as are pools another transaction holds; a later claim parks them.
-- Nothing here waits. The locked pools join the caller's held list.
--
-- Version 8 (migration 0059): a claim of one task (p_single, which
-- claim_tasks v44 passes) that passed at least c_many (8) fits in full
-- pools reads ahead in bulk, c_bulk rows in all: a share of them in
-- every group the passed rows lie in (up to c_bulk / c_ahead groups), and
-- across priorities c_bulk / c_groups rows per queue. Such a claim met the
-- full pools one at a time: each fit it passed cost it a call of
-- fit_candidate and of take_task (the buckets found the next fit, whose
-- pool turned out full), and version 7 then parked 64 rows ahead in each
-- of 8 groups. The eleventh random draw's r24 (20 of 40 queues listed,
-- priorities 0 and 2 wholly in full pools: 20,000 such rows at the head of
-- 200,000) passed 20 pools a claim, about 80 ms each, for its first 66
-- claims: 5.3 s before its first cheap claim, 0.59x the naive query in a
-- 3 s phase. Rows read that have room or no pool are not parked, so a head
-- of open pools costs the read alone, and the read is bounded.
-- A claim of several tasks passes fits in full pools as it takes the
-- others, and parks as version 7 did: reading 8,192 rows ahead on its
-- behalf put a claim_many(100) at 70,000-82,000 buffers (mb_half_pools),
-- over its budget of 10,000, where a claim that took one task after 8
-- full pools has already paid 8 searches.
--
-- Version 7 (migration 0057): where the passed rows' own priorities hold
-- few rows ahead (every task its own priority: deadlines, epoch seconds,
-- scores), the rows ahead in claim order across priorities are read too,
-- c_ahead per queue past the passed row last in claim order, in the claim's
-- direction (p_descending, which claim_tasks v42 passes), and those that fit
-- p_available and sit in a full pool are parked. Version 6 read ahead only
-- within each passed row's priority, so with every task its own priority a
-- claim that took a task parked only the rows it had passed: the ninth
-- random draw's r1 (half the pools full, every task its own priority,
-- order="max") parked about one row a claim, asked fit_candidate 1.45
-- times and take_task 1.62 times a claim, and ran at 0.36-0.40 of the naive
-- query with 8 consumers (docs/performance.md). Without p_descending (NULL,
-- as claim_tasks v41 calls it) nothing more is read.
--
-- Version 6 (migration 0046): a claim that took nothing, every fit it met in
-- a full pool (p_empty), parks the fitting rows of those pools in bulk. Such
-- a claim knows that every unlocked fit it could see sits in a pool it found
-- full: fit_candidate passes over the pools found full, so each candidate it
-- returned was in a new one. Version 5 parked only the rows ahead of each
-- passed row in its own queue and priority: where every task has its own
-- priority (deadlines, epoch seconds) that is none, and an empty claim
-- parked about 21 rows in 11-16 ms, so 20,000 fits in full pools took about
-- 1,000 empty claims to park (bench random_shapes, docs/performance.md).
-- Now, besides those, the passed rows' queues (the 128 with most) are read in
-- value order of required up to what the claim had (ix_tasks_fit_exact),
-- c_bulk rows in all, a share per queue; the rows read, not the rows kept,
-- are bounded, so a claim left empty by row locks reads c_bulk at most and
-- parks nothing it should not: only rows of the pools this call locked full.
-- Any task of a full pool may be parked (the pool's release puts back what a
-- claim needs, unpark_behind), so the order rows are read in does not matter.
--
-- Version 5 (migration 0044): rows ahead in every group passed, and many of
-- them when the claim passed all it may hand over. A group is a queue and a
-- priority of the given rows; the rows ahead of a group are those after its
-- largest id in the same queue and priority (next in claim order either
-- way, as in version 3). Up to c_groups groups, those with the most rows
-- passed first, c_ahead rows ahead each; but when the caller hands over
-- c_bulk_after rows (500, claim_tasks' c_park: it passed at least that many
-- and kept no more), up to c_bulk rows ahead, c_bulk in all. Version 4 read
-- ahead of the passed row with the largest id only, 64 rows.
-- Why: a pool that fills behind a long backlog (or a backlog put back, as
-- the benchmark's reset does) was parked 564 rows a claim, and every claim
-- until the last passed all that was still unparked. listed_half_pools at
-- 1M tasks (50,000 such rows in two queues) took about 35 claims of 50-70
-- ms with one consumer; with eight, 5.5 s of 100-160 ms claims, since the
-- claims that find a pool locked by another's parking (SKIP LOCKED) pass
-- the backlog and park none of it. Now a claim parks about 8,700 rows,
-- at about 17 buffers a row: six claims of 200-400 ms with one consumer,
-- about 2 s with eight (bench shapes x8: 0.95x of the naive query -> 6.4x).
-- The price is the first claims: at 200k tasks the first reads 152,438
-- buffers where it read 18,348, and the claim's p99 measured from a reset
-- grows with the backlog more than before (docs/performance.md, "parking a
-- backlog in bulk").
-- The passed rows' pools are asked first, and where none may be parked
-- nothing ahead is read (one busy pool, freed every moment, is never
-- parked: version 4). The rows are parked by the ctid the locking statement
-- returns, one index lookup a row where id IN (...) made two, and the rows
-- ahead bring their pools with them, where a first build fetched them again
-- by id: that first claim at 200k reads 152,438 buffers, not 197,590.
--
-- Version 4 (migration 0034): the tasks of a pool that had room in the last
-- second (freed_at, set by mark_pool_freed) are not parked. Such a pool
-- fills and frees over and over, and each time it frees, unpark_tasks puts
-- back every task the claims parked meanwhile: with one pool of limit 2
-- holding half of 100,000 tasks, 8 consumers ran at 0.40 of a naive loop,
-- each release unparking about 70 ms of rows while it held the pool's row.
-- The claims walk past those tasks instead, as the naive query does, and a
-- pool that stays full is parked as before, a second after its last free
-- slot at most.
--
-- Version 3 (migration 0031): the rows ahead are parked too. With them go
-- the next c_ahead (64) claimable rows of the same queue and priority as the
-- passed row with the largest id, those past it: they come next in claim
-- order whichever way the claim runs, (priority, id) or (priority DESC, id),
-- over one queue, a list or every queue. Where most tasks wait in full pools
-- (200,000 tasks over 2,000 pools, 90% of the tasks in full ones, 8
-- consumers), every claim walked past about 9 such rows and parked them, two
-- statements and a lock per pool for those 9, and the next claim found the
-- same mix at the head. A call now clears a stretch, and the claims after it
-- find a head with fewer rows to pass over. Rows of another priority are not
-- read, so a claim never parks what lies behind it in its own order. The
-- pools are looked up by name from the rows' own list (= ANY of an array),
-- so the plan reads one pool row per name whatever the pools table holds.
--
-- Version 2 (migration 0026): the row is tested with state = 'queued'
-- COLLATE "C", so the planner cannot use a claim index (whose predicate says
-- state = 'queued') for a lookup by id; see claim_tasks.v19.
CREATE OR REPLACE FUNCTION park_rows(
    p_ids bigint[],
    INOUT locked text[],
    p_empty boolean DEFAULT false,
    p_available bigint DEFAULT NULL,
    p_descending boolean DEFAULT NULL,
    p_single boolean DEFAULT false
)
LANGUAGE plpgsql
SET search_path FROM CURRENT
AS $fn$
DECLARE
    c_ahead CONSTANT integer := 64;
    c_groups CONSTANT integer := 8;
    c_bulk_after CONSTANT integer := 500;  -- claim_tasks' c_park: the most rows a claim hands over
    c_bulk CONSTANT integer := 8192;
    c_many CONSTANT integer := 8;  -- fits passed from which a claim reads ahead in bulk (version 8)
    c_quiet CONSTANT interval := '1 second';  -- a pool freed more recently is not parked
    v_n integer := cardinality(p_ids);
    v_groups integer;
    v_across integer := c_ahead;  -- rows per queue read across priorities
    v_ahead integer;
    v_ids bigint[];
    v_full text[];
    v_pools text[];  -- the pools of the rows ahead
    v_queues text[];  -- after an empty claim: the queues read for fits
    v_share integer;
    v_found bigint;  -- pooled rows the read within the passed rows' priorities found
BEGIN
    IF COALESCE(v_n, 0) = 0 THEN
        RETURN;
    END IF;
    -- The passed rows' pools first: where none may be parked (none full, or
    -- each freed in the last second, as one busy pool is), nothing ahead is
    -- read. A claim that passed 500 rows of such a pool read 8,192 rows
    -- ahead for nothing in a first build of this version: one pool of limit
    -- 2 holding half of 100,000 tasks ran at 0.69 of version 4.
    SELECT array_agg(f.name) INTO v_full
      FROM (SELECT p.name FROM pools p
             WHERE p.name = ANY (ARRAY(SELECT DISTINCT t.pool FROM tasks t
                                        WHERE t.id = ANY (p_ids) AND t.pool IS NOT NULL))
               AND p.running_limit IS NOT NULL AND p.running >= p.running_limit
               AND (p.freed_at IS NULL OR p.freed_at < now() - c_quiet)
             ORDER BY p.name
             FOR UPDATE SKIP LOCKED) f;
    IF v_full IS NULL THEN
        RETURN;
    END IF;
    v_ahead := CASE WHEN v_n >= c_bulk_after THEN c_bulk ELSE c_ahead END;
    v_groups := c_groups;
    IF p_single AND v_n >= c_many AND v_n < c_bulk_after THEN
        -- Many fits passed (version 8): every group they lie in, up to
        -- c_bulk / c_ahead, a share of c_bulk rows each, so the rows read
        -- stay within c_bulk whatever the groups hold.
        v_groups := LEAST((SELECT count(*) FROM (SELECT DISTINCT t.queue, t.priority FROM tasks t
                                                  WHERE t.id = ANY (p_ids)) d),
                          c_bulk / c_ahead);
        v_ahead := c_bulk / GREATEST(v_groups, 1);
        v_across := c_bulk / c_groups;
    END IF;
    -- The rows read are bounded (c_groups groups of v_ahead rows, c_bulk in
    -- all), not the rows kept: a stretch of tasks with no pool costs the
    -- same read and parks nothing.
    -- The rows ahead and their pools in one read: the pools' lookup below
    -- needs no second fetch of thousands of rows by id.
    SELECT p_ids || COALESCE(array_agg(b.id), '{}'), array_agg(DISTINCT b.pool), max(b.seen)
      INTO v_ids, v_pools, v_found
      FROM (SELECT a.id, a.pool, count(*) OVER () AS seen
              FROM (SELECT t.queue, t.priority, max(t.id) AS last FROM tasks t
                     WHERE t.id = ANY (p_ids)
                     GROUP BY t.queue, t.priority
                     ORDER BY count(*) DESC, max(t.id) DESC
                     LIMIT v_groups) g
             CROSS JOIN LATERAL (SELECT t.id, t.pool FROM tasks t
                                  WHERE t.state = 'queued' AND NOT t.parked AND t.queue = g.queue
                                    AND t.priority = g.priority AND t.id > g.last
                                  ORDER BY t.priority, t.id
                                  LIMIT v_ahead) a
             WHERE a.pool IS NOT NULL
             LIMIT c_bulk) b;
    IF p_descending IS NOT NULL AND NOT p_empty AND COALESCE(v_found, 0) < c_ahead THEN
        -- Few rows ahead within the passed priorities (version 7): read on
        -- across priorities, v_across rows per queue (c_groups queues) past
        -- the passed row last in claim order, by ix_tasks_claim (descending:
        -- priority DESC, id DESC, the claim's rows up to the order within
        -- one priority, which the read above covers). Only fits are kept:
        -- a row the claim could not take is one it never passes.
        IF p_descending THEN
            SELECT v_ids || COALESCE(array_agg(a.id), '{}'), v_pools || COALESCE(array_agg(DISTINCT a.pool), '{}')
              INTO v_ids, v_pools
              FROM (SELECT t.queue, min(t.priority) AS edge FROM tasks t
                     WHERE t.id = ANY (p_ids)
                     GROUP BY t.queue
                     ORDER BY count(*) DESC, t.queue
                     LIMIT c_groups) g
             CROSS JOIN LATERAL (SELECT t.id, t.pool, t.required FROM tasks t
                                  WHERE t.state = 'queued' AND NOT t.parked AND t.queue = g.queue
                                    AND t.priority < g.edge
                                  ORDER BY t.priority DESC, t.id DESC
                                  LIMIT v_across) a
             WHERE a.pool IS NOT NULL AND a.required <= COALESCE(p_available, 9223372036854775807);
        ELSE
            SELECT v_ids || COALESCE(array_agg(a.id), '{}'), v_pools || COALESCE(array_agg(DISTINCT a.pool), '{}')
              INTO v_ids, v_pools
              FROM (SELECT t.queue, max(t.priority) AS edge FROM tasks t
                     WHERE t.id = ANY (p_ids)
                     GROUP BY t.queue
                     ORDER BY count(*) DESC, t.queue
                     LIMIT c_groups) g
             CROSS JOIN LATERAL (SELECT t.id, t.pool, t.required FROM tasks t
                                  WHERE t.state = 'queued' AND NOT t.parked AND t.queue = g.queue
                                    AND t.priority > g.edge
                                  ORDER BY t.priority, t.id
                                  LIMIT v_across) a
             WHERE a.pool IS NOT NULL AND a.required <= COALESCE(p_available, 9223372036854775807);
        END IF;
    END IF;
    IF p_empty THEN
        -- The claim took nothing: every fit it could see is in a full pool
        -- (version 6). The passed rows' queues, a share of c_bulk rows each,
        -- read in (queue, required, priority, id) order so that the LIMIT
        -- bounds the rows read; those of the pools locked above are kept.
        v_queues := ARRAY(SELECT t.queue FROM tasks t WHERE t.id = ANY (p_ids)
                           GROUP BY t.queue ORDER BY count(*) DESC, t.queue
                           LIMIT c_bulk / c_ahead);
        v_share := GREATEST(c_bulk / GREATEST(cardinality(v_queues), 1), c_ahead);
        v_ids := v_ids || ARRAY(SELECT f.id
                                  FROM unnest(v_queues) AS q(name)
                                 CROSS JOIN LATERAL (SELECT t.id, t.pool FROM tasks t
                                                      WHERE t.queue = q.name AND t.state = 'queued' AND NOT t.parked
                                                        AND t.required <= COALESCE(p_available, 9223372036854775807)
                                                      ORDER BY t.required, t.priority, t.id
                                                      LIMIT v_share) f
                                 WHERE f.pool = ANY (v_full));
    END IF;
    -- The other full pools of the rows ahead, locked the same way (nothing
    -- waits, so the two statements' order of locks cannot deadlock).
    v_full := v_full || ARRAY(SELECT p.name FROM pools p
                               WHERE p.name = ANY (v_pools)
                                 AND p.name <> ALL (v_full)
                                 AND p.running_limit IS NOT NULL AND p.running >= p.running_limit
                                 AND (p.freed_at IS NULL OR p.freed_at < now() - c_quiet)
                               ORDER BY p.name
                                 FOR UPDATE SKIP LOCKED);
    UPDATE tasks u SET parked = true
      FROM (SELECT t.ctid AS tid FROM tasks t
             WHERE t.id = ANY (v_ids) AND t.pool = ANY (v_full) AND t.state = 'queued' COLLATE "C" AND NOT t.parked
             FOR UPDATE SKIP LOCKED) x
     WHERE u.ctid = x.tid;
    locked := locked || ARRAY(SELECT f.name FROM unnest(v_full) AS f(name) WHERE f.name <> ALL (locked));
END
$fn$;
