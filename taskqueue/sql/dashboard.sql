-- Read-only insights for the dashboard and the Prometheus metrics.
-- taskqueue/store/insights.py asks for them. Nothing here writes: every action of
-- the dashboard goes through TaskQueue's public methods.
-- Each one reads through a partial index (claim, parked, scheduled, running,
-- errored, finished), so its cost follows the live backlog and the failures,
-- never the finished history that makes up most of a big table.

-- name: snapshot_time
-- The database time the summary's ages are measured from (the statements of
-- one transaction all see this now()).
SELECT now() AS now;

-- name: live_counts
-- Live tasks and failed ones per (queue, state, priority), each branch from
-- one partial index: queued from ix_tasks_claim (an index-only scan: its key
-- is queue, priority, id), parked from ix_tasks_parked (with their pool),
-- scheduled from ix_tasks_scheduled, running from ix_tasks_running, failed
-- from ix_tasks_errored (index-only). A due scheduled task counts as queued,
-- as get_task shows it. No branch reads the finished history.
SELECT queue, 'queued' AS state, priority, CAST(NULL AS text) AS pool, count(*) AS n
  FROM tasks WHERE state = 'queued' AND NOT parked
 GROUP BY queue, priority
UNION ALL
SELECT queue, 'queued', priority, pool, count(*)
  FROM tasks WHERE parked AND state = 'queued'
 GROUP BY queue, priority, pool
UNION ALL
SELECT queue, CASE WHEN run_at <= now() THEN 'queued' ELSE 'scheduled' END, priority, NULL, count(*)
  FROM tasks WHERE state = 'scheduled'
 GROUP BY 1, 2, priority
UNION ALL
SELECT queue, 'running', priority, NULL, count(*)
  FROM tasks WHERE state = 'running'
 GROUP BY queue, priority
UNION ALL
SELECT queue, 'failed', priority, NULL, count(*)
  FROM tasks WHERE state = 'failed'
 GROUP BY queue, priority;

-- name: oldest_waiting
-- Per queue, the earliest run_at among the tasks next in line: the head
-- (smallest id) of each (queue, priority) line of ix_tasks_claim, the order
-- claims take them in, found by a loose index scan (one probe per line), plus
-- the parked tasks and the due scheduled ones. A line's head has waited
-- longest unless a retried or delayed task behind it became due earlier;
-- reading every queued row to catch that would cost a heap visit per waiting
-- task.
WITH RECURSIVE heads AS (
    (SELECT queue, priority, id FROM tasks
      WHERE state = 'queued' AND NOT parked
      ORDER BY queue, priority, id LIMIT 1)
    UNION ALL
    SELECT n.queue, n.priority, n.id
      FROM heads h
     CROSS JOIN LATERAL (
           SELECT t.queue, t.priority, t.id FROM tasks t
            WHERE t.state = 'queued' AND NOT t.parked
              AND (t.queue, t.priority) > (h.queue, h.priority)
            ORDER BY t.queue, t.priority, t.id LIMIT 1) n
)
SELECT queue, min(run_at) AS oldest_run_at
  FROM (SELECT t.queue, t.run_at FROM heads h JOIN tasks t ON t.id = h.id
        UNION ALL
        SELECT queue, run_at FROM tasks WHERE parked AND state = 'queued'
        UNION ALL
        SELECT queue, run_at FROM tasks WHERE state = 'scheduled' AND run_at <= now()) w
 GROUP BY queue;

-- name: pool_waiting
-- Queued tasks per pool, parked or not: the pools page only (a queued task's
-- pool is not in ix_tasks_claim, so this visits each queued task's row). Two
-- branches, so that each one's predicate matches a partial index; "state =
-- 'queued'" alone matches neither and would read the whole table.
SELECT pool, sum(n) AS n
  FROM (SELECT pool, count(*) AS n FROM tasks
         WHERE state = 'queued' AND NOT parked AND pool IS NOT NULL GROUP BY pool
        UNION ALL
        SELECT pool, count(*) FROM tasks
         WHERE parked AND state = 'queued' GROUP BY pool) w
 GROUP BY pool;

-- name: finished_per_minute
-- Throughput of the last hour: tasks that reached a final state, per minute
-- ago (0 = the current minute). An index-only scan of ix_tasks_finished.
SELECT CAST(floor(EXTRACT(EPOCH FROM now() - finished_at) / 60) AS integer) AS minute_ago, count(*) AS n
  FROM tasks
 WHERE finished_at IS NOT NULL AND finished_at > now() - interval '1 hour'
 GROUP BY 1 ORDER BY 1;

-- name: pool_rows
-- Every pool row, those without limit or running tasks included: the
-- dashboard edits limits of any pool a task names.
SELECT name, running_limit, running FROM pools ORDER BY name;

-- name: browse_tasks
-- One page of the task list, newest first, by keyset on id (:before_id):
-- each page costs the same however deep it is, where OFFSET would read every
-- row before it. Filters are optional (NULL: any). The state filter is on
-- the stored state; a due scheduled task is listed as scheduled. Payload and
-- error are cut short: the task page shows them whole.
SELECT id, queue, priority, required, pool, state, run_at <= now() AS due, attempts, max_attempts,
       created_at, run_at, finished_at, worker,
       left(CAST(payload AS text), 160) AS payload_head, left(error, 160) AS error_head
  FROM tasks
 WHERE (CAST(:state AS text) IS NULL OR state = CAST(:state AS text))
   AND (CAST(:queue AS text) IS NULL OR queue = CAST(:queue AS text))
   AND (CAST(:pool AS text) IS NULL OR pool = CAST(:pool AS text))
   AND (CAST(:priority_min AS integer) IS NULL OR priority >= CAST(:priority_min AS integer))
   AND (CAST(:priority_max AS integer) IS NULL OR priority <= CAST(:priority_max AS integer))
   AND (CAST(:before_id AS bigint) IS NULL OR id < CAST(:before_id AS bigint))
 ORDER BY id DESC
 LIMIT :limit;

-- name: limit_browse_time
-- A filter that matches almost nothing walks the whole primary key; it gets
-- this long (this transaction only) and the page asks for a narrower filter.
SELECT set_config('statement_timeout', :timeout, true);

-- name: failure_groups
-- Failed tasks, and waiting tasks that failed an attempt and will retry,
-- grouped by error: the first line with every number replaced by N, so
-- "timeout after 30 s on host 10.0.0.7" and "... 10.0.0.9" are one group.
-- Reads ix_tasks_errored (same predicate), never the finished history.
SELECT kind, fingerprint, count(*) AS n, min(id) AS first_id, max(id) AS last_id,
       max(COALESCE(finished_at, run_at)) AS latest, (array_agg(error ORDER BY id DESC))[1] AS sample,
       array_agg(DISTINCT queue::text) AS queues
  FROM (SELECT id, queue, error, finished_at, run_at,
               CASE WHEN state = 'failed' THEN 'failed' ELSE 'retrying' END AS kind,
               left(regexp_replace(split_part(COALESCE(error, ''), E'\n', 1), '[0-9]+', 'N', 'g'), 200) AS fingerprint
          FROM tasks
         WHERE (state = 'failed' OR (error IS NOT NULL AND state IN ('queued', 'scheduled') AND attempts > 0))) f
 GROUP BY kind, fingerprint
 ORDER BY n DESC, fingerprint
 LIMIT :limit;

-- name: failure_group_members
-- The tasks of one failure group, newest first, by keyset on id; the bulk
-- actions take their ids from here and act through TaskQueue one by one.
SELECT id, queue, priority, pool, state, attempts, max_attempts, finished_at, run_at, left(error, 300) AS error_head
  FROM tasks
 WHERE (state = 'failed' OR (error IS NOT NULL AND state IN ('queued', 'scheduled') AND attempts > 0))
   AND CASE WHEN state = 'failed' THEN 'failed' ELSE 'retrying' END = CAST(:kind AS text)
   AND left(regexp_replace(split_part(COALESCE(error, ''), E'\n', 1), '[0-9]+', 'N', 'g'), 200) = CAST(:fingerprint AS text)
   AND (CAST(:before_id AS bigint) IS NULL OR id < CAST(:before_id AS bigint))
 ORDER BY id DESC
 LIMIT :limit;

-- name: running_by_worker
-- What each worker holds now, from the running tasks (ix_tasks_running):
-- how many, the resources they take, and the soonest lease expiry.
SELECT worker, count(*) AS tasks, COALESCE(sum(required), 0) AS required,
       array_agg(id ORDER BY id) AS task_ids, min(lease_expires_at) AS next_expiry,
       max(started_at) AS last_claim
  FROM tasks WHERE state = 'running'
 GROUP BY worker ORDER BY worker;
