-- Reads and housekeeping: tasks by id, listings, counts for stats, pruning.
-- Tables are unqualified: each connection's search_path is the queue schema.
-- Every value is a bound parameter; no name is ever pasted into SQL.

-- name: _task_rows
-- Tasks as a read reports them. A scheduled task whose run_at has passed is
-- reported as queued: it is claimable, and the next claim will promote it.
-- A read carries no claim, so no lease token. The columns are Task's fields
-- in their order, as in claim_tasks: rows become Task(*row).
SELECT id, queue, payload, priority, required, pool,
       CASE WHEN state = 'scheduled' AND run_at <= now() THEN 'queued' ELSE state END AS state,
       attempts, max_attempts, run_at, created_at, worker, lease_expires_at, result, error,
       dedupe_key, started_at, finished_at, cancel_requested, lease_seconds, estimate, NULL::text AS lease_token
  FROM tasks

-- name: get_task
-- One task by id.
-- compose: _task_rows
 WHERE id = :id;

-- name: list_tasks
-- Newest first, filtered by state and queue when given.
-- compose: _task_rows
 WHERE (CAST(:state AS text) IS NULL
        OR CASE WHEN state = 'scheduled' AND run_at <= now() THEN 'queued' ELSE state END = CAST(:state AS text))
   AND (CAST(:queue AS text) IS NULL OR queue = CAST(:queue AS text))
 ORDER BY id DESC
 LIMIT :limit;

-- name: count_by_state
SELECT CASE WHEN state = 'scheduled' AND run_at <= now() THEN 'queued' ELSE state END AS state,
       count(*) AS n
  FROM tasks GROUP BY 1;

-- name: count_waiting_by_queue_priority
SELECT queue, priority, count(*) AS n,
       EXTRACT(EPOCH FROM now() - min(run_at)) AS oldest_wait_seconds
  FROM tasks
 WHERE state = 'queued' OR (state = 'scheduled' AND run_at <= now())
 GROUP BY queue, priority ORDER BY queue, priority;

-- name: count_by_queue_state
SELECT queue, CASE WHEN state = 'scheduled' AND run_at <= now() THEN 'queued' ELSE state END AS state,
       count(*) AS n
  FROM tasks GROUP BY 1, 2 ORDER BY 1, 2;

-- name: count_parked_by_pool
-- Queued tasks waiting out of the claim index because their pool is full
-- (read from ix_tasks_parked).
SELECT pool, count(*) AS n FROM tasks WHERE parked AND state = 'queued' GROUP BY pool;

-- name: count_finished_since
-- Throughput: tasks that reached a final state in the last :seconds.
SELECT count(*) AS n FROM tasks
 WHERE finished_at IS NOT NULL AND finished_at >= now() - make_interval(secs => :seconds);

-- name: database_now
SELECT now() AS now, clock_timestamp() AS clock;

-- name: next_run_at
-- The earliest pending run_at, compared with clock_timestamp() because now()
-- is frozen at the start of the transaction.
SELECT EXTRACT(EPOCH FROM (min(run_at) - clock_timestamp())) AS seconds
  FROM tasks WHERE state = 'scheduled';

-- name: prune_finished
-- Deletes finished tasks older than the retention, in bounded batches.
DELETE FROM tasks
 WHERE id IN (SELECT id FROM tasks
               WHERE finished_at IS NOT NULL
                 AND finished_at < now() - make_interval(secs => :older_than)
                 AND state IN ('done', 'failed', 'cancelled')
               ORDER BY finished_at
               LIMIT :batch);
