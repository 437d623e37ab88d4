-- park_rows: park the given queued tasks whose pool is full, and the rows
-- right after them in claim order whose pool is full, unless the pool had
-- room in the last second.
--
-- A claim passes the rows it walked past because their pool was full. Their
-- pools are locked first (FOR UPDATE SKIP LOCKED, and only those still full
-- under the lock), so no release can free a slot before this transaction
-- ends: a task is never parked in a pool with room. Rows busy elsewhere are
-- skipped, as are pools another transaction holds; a later claim parks them.
-- Nothing here waits. The locked pools join the caller's held list.
--
-- Version 6 (migration 0045): a pool that has had room before is parked
-- only as much as its next release can unpark quickly. Every release that
-- gives a full pool room unparks all its parked tasks in its own
-- transaction, about 85 us a row (each goes back into every claim index).
-- A pool of limit 1 whose tasks run 2 s, with 20,000 of them queued
-- (bench pools --only slow), was full for longer than the quiet second
-- after each release, so the claims parked its whole backlog, and each
-- release then took 1.4-1.8 s: the pool ran its tasks at about 60% of its
-- limit. Now a pool with a freed_at parks at most c_rows_per_second rows for
-- each second it has been full past the quiet one, counted in
-- pools.parked_count (reset by mark_pool_freed when it frees): a release
-- costs about a tenth of the time its pool was full. The claims pass the
-- rest, as the naive query does. A pool that has never had room since it
-- filled (freed_at NULL: a limit of 0, or a first fill) is parked as in
-- version 5, and so, in effect, is one full for minutes.
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
-- at about 22 buffers a row: six claims of 200-400 ms with one consumer,
-- about 2 s with eight (bench shapes x8: 0.95x of the naive query -> 6.4x).
-- The price is the first claims: at 200k tasks the first reads 197,595
-- buffers where it read 18,348, and the claim's p99 measured from a reset
-- grows with the backlog more than before (docs/performance.md, "parking a
-- backlog in bulk").
-- The passed rows' pools are asked first, and where none may be parked
-- nothing ahead is read (one busy pool, freed every moment, is never
-- parked: version 4).
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
-- pool_park_room: how many more rows of a full pool may be parked (NULL: no
-- bound), from when it last had room and what was parked since (park_rows v6).
CREATE OR REPLACE FUNCTION pool_park_room(p_freed_at timestamptz, p_parked bigint, p_quiet interval, p_per_second integer)
RETURNS bigint
LANGUAGE sql
STABLE
AS $fn$
    SELECT CASE WHEN p_freed_at IS NULL THEN NULL
                ELSE GREATEST(floor(EXTRACT(EPOCH FROM now() - p_freed_at - p_quiet) * p_per_second)::bigint - p_parked, 0)
           END
$fn$;

CREATE OR REPLACE FUNCTION park_rows(p_ids bigint[], INOUT locked text[])
LANGUAGE plpgsql
SET search_path FROM CURRENT
AS $fn$
DECLARE
    c_ahead CONSTANT integer := 64;
    c_groups CONSTANT integer := 8;
    c_bulk_after CONSTANT integer := 500;  -- claim_tasks' c_park: the most rows a claim hands over
    c_bulk CONSTANT integer := 8192;
    c_quiet CONSTANT interval := '1 second';  -- a pool freed more recently is not parked
    c_rows_per_second CONSTANT integer := 1000;  -- rows a pool with a freed_at may have parked per second full
    v_n integer := cardinality(p_ids);
    v_ahead integer;
    v_room bigint;  -- the most rows of one passed pool that may be parked; NULL: no bound
    v_bounded boolean;
    v_bnames text[];  -- the full pools that may park only so many rows, and how many
    v_brooms bigint[];
    v_ids bigint[];
    v_full text[];
BEGIN
    IF COALESCE(v_n, 0) = 0 THEN
        RETURN;
    END IF;
    -- The passed rows' pools first: where none may be parked (none full, or
    -- each freed in the last second, as one busy pool is), nothing ahead is
    -- read. A claim that passed 500 rows of such a pool read 8,192 rows
    -- ahead for nothing in a first build of this version: one pool of limit
    -- 2 holding half of 100,000 tasks ran at 0.69 of version 4.
    SELECT array_agg(f.name), bool_and(f.room IS NOT NULL), max(f.room),
           array_agg(f.name) FILTER (WHERE f.room IS NOT NULL), array_agg(f.room) FILTER (WHERE f.room IS NOT NULL)
      INTO v_full, v_bounded, v_room, v_bnames, v_brooms
      FROM (SELECT p.name, pool_park_room(p.freed_at, p.parked_count, c_quiet, c_rows_per_second) AS room FROM pools p
             WHERE p.name = ANY (ARRAY(SELECT DISTINCT t.pool FROM tasks t
                                        WHERE t.id = ANY (p_ids) AND t.pool IS NOT NULL))
               AND p.running_limit IS NOT NULL AND p.running >= p.running_limit
               AND COALESCE(pool_park_room(p.freed_at, p.parked_count, c_quiet, c_rows_per_second), 1) > 0
             ORDER BY p.name
             FOR UPDATE SKIP LOCKED) f;
    IF v_full IS NULL THEN
        RETURN;
    END IF;
    v_ahead := CASE WHEN v_n >= c_bulk_after THEN c_bulk ELSE c_ahead END;
    IF v_bounded THEN
        v_ahead := LEAST(v_ahead, v_room);  -- no more ahead than any of them may park
    END IF;
    -- The rows read are bounded (c_groups groups of v_ahead rows, c_bulk in
    -- all), not the rows kept: a stretch of tasks with no pool costs the
    -- same read and parks nothing.
    v_ids := p_ids || ARRAY(SELECT a.id
                              FROM (SELECT t.queue, t.priority, max(t.id) AS last FROM tasks t
                                     WHERE t.id = ANY (p_ids)
                                     GROUP BY t.queue, t.priority
                                     ORDER BY count(*) DESC, max(t.id) DESC
                                     LIMIT c_groups) g
                             CROSS JOIN LATERAL (SELECT t.id, t.pool FROM tasks t
                                                  WHERE t.state = 'queued' AND NOT t.parked AND t.queue = g.queue
                                                    AND t.priority = g.priority AND t.id > g.last
                                                  ORDER BY t.priority, t.id
                                                  LIMIT v_ahead) a
                             WHERE a.pool IS NOT NULL
                             LIMIT c_bulk);
    -- The other full pools of the rows ahead, locked the same way (nothing
    -- waits, so the two statements' order of locks cannot deadlock).
    SELECT v_full || COALESCE(array_agg(f.name), '{}'),
           v_bnames || COALESCE(array_agg(f.name) FILTER (WHERE f.room IS NOT NULL), '{}'),
           v_brooms || COALESCE(array_agg(f.room) FILTER (WHERE f.room IS NOT NULL), '{}')
      INTO v_full, v_bnames, v_brooms
      FROM (SELECT p.name, pool_park_room(p.freed_at, p.parked_count, c_quiet, c_rows_per_second) AS room FROM pools p
             WHERE p.name = ANY (ARRAY(SELECT DISTINCT t.pool FROM tasks t
                                        WHERE t.id = ANY (v_ids[v_n + 1:]) AND t.pool IS NOT NULL))
               AND p.name <> ALL (v_full)
               AND p.running_limit IS NOT NULL AND p.running >= p.running_limit
               AND COALESCE(pool_park_room(p.freed_at, p.parked_count, c_quiet, c_rows_per_second), 1) > 0
             ORDER BY p.name
             FOR UPDATE SKIP LOCKED) f;
    -- A pool that may park only so many (v_bnames, from the statements that
    -- locked them) keeps its first rows in the order given (passed first,
    -- then ahead); the pools' counts grow by what was parked. Where no pool
    -- has a bound (the usual case: never freed) the choice is skipped.
    IF cardinality(v_bnames) > 0 THEN
        v_ids := ARRAY(SELECT x.id
                         FROM (SELECT u.id, t.pool, row_number() OVER (PARTITION BY t.pool ORDER BY u.ord) AS rn
                                 FROM unnest(v_ids) WITH ORDINALITY AS u(id, ord)
                                 JOIN tasks t ON t.id = u.id) x
                        WHERE x.pool <> ALL (v_bnames) OR x.rn <= v_brooms[array_position(v_bnames, x.pool)]);
    END IF;
    WITH parked AS (
        UPDATE tasks SET parked = true
         WHERE id IN (SELECT t.id FROM tasks t
                       WHERE t.id = ANY (v_ids) AND t.pool = ANY (v_full) AND t.state = 'queued' COLLATE "C" AND NOT t.parked
                       FOR UPDATE SKIP LOCKED)
        RETURNING pool)
    UPDATE pools p SET parked_count = p.parked_count + c.n
      FROM (SELECT parked.pool, count(*) AS n FROM parked GROUP BY parked.pool) c
     WHERE p.name = ANY (v_full) AND p.name = c.pool;  -- by name, whatever the pools table holds
    locked := locked || ARRAY(SELECT f.name FROM unnest(v_full) AS f(name) WHERE f.name <> ALL (locked));
END
$fn$;
