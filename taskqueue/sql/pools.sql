-- Concurrency pools: their rows, limits and running counts.
-- Tables are unqualified: each connection's search_path is the queue schema.
-- Every value is a bound parameter; no name is ever pasted into SQL.

-- name: lock_pools
-- Locks pool rows in name order, so transactions that release several pools
-- cannot deadlock with each other.
SELECT name FROM pools WHERE name = ANY (CAST(:names AS text[])) ORDER BY name FOR UPDATE;

-- name: release_pools
-- Takes counts off pools already locked by lock_pools.
UPDATE pools p SET running = p.running - r.n
  FROM unnest(CAST(:names AS text[]), CAST(:counts AS integer[])) AS r(name, n)
 WHERE p.name = r.name
RETURNING p.name, p.running, p.running_limit;

-- name: ensure_pools
-- Pool rows exist before their tasks can be claimed, so the claim only ever
-- updates pool rows and never waits on another transaction's insert.
INSERT INTO pools (name) SELECT DISTINCT unnest(CAST(:names AS text[])) ORDER BY 1
ON CONFLICT (name) DO NOTHING;

-- name: set_pool_limit
-- Upsert of the limit only; running is never written here. limit_changed_at
-- is read from the clock after the row lock is taken, so every claim admitted
-- under the old limit started before it (see invariant_pool_over_limit).
INSERT INTO pools (name, running_limit, limit_changed_at) VALUES (:name, :limit, clock_timestamp())
ON CONFLICT (name) DO UPDATE SET running_limit = EXCLUDED.running_limit, limit_changed_at = clock_timestamp();

-- name: list_pools
-- Pools that have a limit or running tasks.
SELECT name, running_limit, running FROM pools
 WHERE running_limit IS NOT NULL OR running > 0
 ORDER BY name;

-- name: get_pool
SELECT name, running_limit, running FROM pools WHERE name = :name;
