-- The invariant checks and their repairs (TaskQueue.check).
-- The checks read the invariant_* views (migrations/functions/invariant_*.vN.sql),
-- so `TaskQueue.check()` and an operator's SELECT can never disagree.
-- TaskQueue.check() runs them together in one REPEATABLE READ snapshot.
-- Tables are unqualified: each connection's search_path is the queue schema.
-- Every value is a bound parameter; no name is ever pasted into SQL.

-- name: check_pool_counts
SELECT * FROM invariant_pool_counts ORDER BY subject;

-- name: check_pool_over_limit
SELECT * FROM invariant_pool_over_limit ORDER BY subject;

-- name: check_running_without_lease
SELECT * FROM invariant_running_without_lease ORDER BY task_id;

-- name: check_finished_with_lease
SELECT * FROM invariant_finished_with_lease ORDER BY task_id;

-- name: check_attempts_exceeded
SELECT * FROM invariant_attempts_exceeded ORDER BY task_id;

-- name: check_overdue_scheduled
SELECT * FROM invariant_overdue_scheduled ORDER BY task_id;

-- name: check_parked_in_open_pool
SELECT * FROM invariant_parked_in_open_pool ORDER BY task_id;

-- name: check_parked_not_queued
SELECT * FROM invariant_parked_not_queued ORDER BY task_id;

-- name: set_local_lock_timeout
-- Repair: wait at most this long for any lock, for this transaction only, so
-- a repair yields to claims and completions instead of joining a deadlock.
SELECT set_config('lock_timeout', :timeout, true);

-- name: ensure_pools_of_running_tasks
-- Repair: a running task whose pool row is missing gets one (running 0; the
-- recount below sets it), inserted in name order like ensure_pools.
INSERT INTO pools (name)
SELECT DISTINCT t.pool FROM tasks t
 WHERE t.state = 'running' AND t.pool IS NOT NULL
 ORDER BY 1
ON CONFLICT (name) DO NOTHING;

-- name: lock_all_pools
-- Repair: every pool row, locked in name order like lock_pools, so a recount
-- cannot deadlock with releases. Claims, completions and rescues change a
-- task's state and its pool count in one transaction, and each holds its pool
-- row until it commits, so once these locks are held the next statement's
-- snapshot sees counts and task states that agree.
SELECT name FROM pools ORDER BY name FOR UPDATE;

-- name: recount_pools
-- Repair: sets each locked pool's running to the count of its running tasks,
-- returning only the pools that changed, with the old value.
WITH actual AS (
    SELECT t.pool, count(*) AS n FROM tasks t
     WHERE t.state = 'running' AND t.pool IS NOT NULL
     GROUP BY t.pool
), judged AS (
    SELECT p.name, p.running AS stored, COALESCE(a.n, 0) AS n
      FROM pools p LEFT JOIN actual a ON a.pool = p.name
     WHERE p.running <> COALESCE(a.n, 0)
)
UPDATE pools p SET running = j.n
  FROM judged j
 WHERE p.name = j.name
RETURNING p.name, j.stored, p.running;

-- name: clear_finished_leases
-- Repair: a task that is not running holds no lease.
UPDATE tasks SET lease_token = NULL, lease_expires_at = NULL
 WHERE state <> 'running' AND (lease_token IS NOT NULL OR lease_expires_at IS NOT NULL)
RETURNING id, state;

-- name: expire_leaseless_tasks
-- Repair: a running task with no lease or worker gets one that has already
-- expired, so the next rescue requeues it (or fails it when out of attempts).
UPDATE tasks
   SET lease_token = COALESCE(lease_token, gen_random_uuid()),
       lease_expires_at = now(),
       lease_seconds = COALESCE(lease_seconds, 0),
       worker = COALESCE(worker, 'unknown (repaired)')
 WHERE state = 'running' AND (lease_token IS NULL OR lease_expires_at IS NULL OR worker IS NULL)
RETURNING id;

-- name: promote_overdue_scheduled
-- Repair: what the next claim would do to a due scheduled task.
UPDATE tasks SET state = 'queued'
 WHERE state = 'scheduled' AND run_at < now() - interval '5 seconds'
RETURNING id;

-- name: unpark_unqueued_tasks
-- Repair: only a queued task is parked. A running, scheduled or finished one
-- loses the flag, so it is in the claim index when it is queued again.
UPDATE tasks SET parked = false
 WHERE parked AND state <> 'queued'
RETURNING id, state;

-- name: unpark_open_pool_tasks
-- Repair: parked tasks that a claim could need go back into the claim index:
-- their pool has room (or no row) and they are not behind enough unparked
-- tasks (invariant_parked_in_open_pool). The pool trigger keeps this on
-- every release; this catches a pool emptied behind its back (TRUNCATE, or
-- a hand-edited row with triggers off).
UPDATE tasks t SET parked = false
  FROM invariant_parked_in_open_pool v
 WHERE t.id = v.task_id AND t.parked AND t.state = 'queued'
RETURNING t.id, t.pool;
