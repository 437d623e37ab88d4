-- The named statements of taskqueue. Only taskqueue/store.py runs them.
-- Tables are unqualified: each connection's search_path is the queue schema.
-- Every value is a bound parameter; no name is ever pasted into SQL.

-- name: enqueue_task
-- One task in one statement, so an enqueue on a connection of our own is one
-- autocommit round trip: the pool row first (claims only update pool rows),
-- then the task, then the wake-up signal, which PostgreSQL sends at commit and
-- only when a row went in. The partial unique index makes a concurrent enqueue
-- with the same active dedupe key insert nothing; the caller then looks the
-- holder up. The ON CONFLICT target repeats the index predicate, as
-- PostgreSQL requires.
WITH new_pool AS (
    INSERT INTO pools (name)
    SELECT CAST(:pool AS text) WHERE CAST(:pool AS text) IS NOT NULL
    ON CONFLICT (name) DO NOTHING
), new_task AS (
    INSERT INTO tasks (queue, payload, priority, required, pool, state, max_attempts, run_at, dedupe_key, estimate)
    SELECT :queue, CAST(:payload AS jsonb), :priority, :required, :pool,
           CASE WHEN r.at > now() THEN 'scheduled' ELSE 'queued' END,
           :max_attempts, r.at, :dedupe_key, CAST(:estimate AS double precision)
      FROM (SELECT COALESCE(CAST(:run_at AS timestamptz),
                            now() + make_interval(secs => COALESCE(CAST(:delay AS double precision), 0))) AS at) r
    ON CONFLICT (queue, dedupe_key)
       WHERE dedupe_key IS NOT NULL AND state IN ('queued', 'scheduled', 'running')
       DO NOTHING
    RETURNING id
)
SELECT id, pg_notify(:channel, '') IS NULL AS signalled FROM new_task;

-- name: reserve_task_ids
-- Ids for a COPY batch, ascending in input order (FIFO within a priority),
-- and the transaction's now(): run_at and state of each copied task are
-- computed from that one database time, exactly as an INSERT would compute
-- them, since now() stays fixed for the whole transaction.
SELECT now() AS now,
       ARRAY(SELECT nextval('tasks_id_seq') FROM generate_series(1, CAST(:n AS integer)) ORDER BY 1) AS ids;

-- name: copy_tasks
-- enqueue_many's fast path, for batches without dedupe keys (COPY has no
-- ON CONFLICT): several times the rate of INSERT ... SELECT FROM unnest.
-- Ids come from reserve_task_ids, so they can go back to the caller. Also
-- used for batches that give estimates (copy_tasks_now stays the lean path).
COPY tasks (id, queue, payload, priority, required, pool, state, max_attempts, run_at, estimate) FROM STDIN;

-- name: copy_tasks_now
-- copy_tasks for a batch in which no task gave run_at or delay: run_at takes
-- its default, now(), on the server, which saves formatting and parsing a
-- timestamp per row (about a sixth of the COPY's time).
COPY tasks (id, queue, payload, priority, required, pool, state, max_attempts) FROM STDIN;

-- name: insert_tasks
-- A batch from parallel arrays, one round trip. Ids are drawn in the order of
-- the arrays (ORDER BY ord), so sorting the returned ids restores that order.
INSERT INTO tasks (queue, payload, priority, required, pool, state, max_attempts, run_at, dedupe_key, estimate)
SELECT s.queue, CAST(s.payload AS jsonb), s.priority, s.required, s.pool,
       CASE WHEN s.at > now() THEN 'scheduled' ELSE 'queued' END,
       s.max_attempts, s.at, s.dedupe_key, s.estimate
  FROM (SELECT u.*, COALESCE(u.run_at, now() + make_interval(secs => COALESCE(u.delay, 0))) AS at
          FROM unnest(CAST(:queues AS text[]), CAST(:payloads AS text[]), CAST(:priorities AS integer[]),
                      CAST(:requireds AS integer[]), CAST(:pools AS text[]), CAST(:max_attempts AS integer[]),
                      CAST(:run_ats AS timestamptz[]), CAST(:delays AS double precision[]),
                      CAST(:dedupe_keys AS text[]), CAST(:estimates AS double precision[]))
               WITH ORDINALITY AS u(queue, payload, priority, required, pool, max_attempts, run_at, delay, dedupe_key,
                                    estimate, ord)
         ORDER BY u.ord) s
 ORDER BY s.ord
ON CONFLICT (queue, dedupe_key)
   WHERE dedupe_key IS NOT NULL AND state IN ('queued', 'scheduled', 'running')
   DO NOTHING
RETURNING id, queue, dedupe_key;

-- name: find_active_dedupe
-- The active task that holds a dedupe key, if any.
SELECT id FROM tasks
 WHERE queue = :queue AND dedupe_key = :dedupe_key
   AND dedupe_key IS NOT NULL AND state IN ('queued', 'scheduled', 'running');

-- name: find_active_dedupes
-- The active tasks that hold any of these (queue, dedupe key) pairs.
SELECT t.id, t.queue, t.dedupe_key
  FROM unnest(CAST(:queues AS text[]), CAST(:dedupe_keys AS text[])) AS k(queue, dedupe_key)
  JOIN tasks t ON t.queue = k.queue AND t.dedupe_key = k.dedupe_key
 WHERE t.dedupe_key IS NOT NULL AND t.state IN ('queued', 'scheduled', 'running');

-- name: notify_wakeup
-- One signal per transaction, no data: listeners just claim again.
-- PostgreSQL delivers it at commit and folds duplicates within a transaction.
SELECT pg_notify(:channel, '');

-- name: claim_tasks
-- The resource-fit claim; see migrations/functions/claim_tasks.vN.sql (the
-- newest version is the one in use).
SELECT id, queue, payload, priority, required, pool, state, attempts, max_attempts,
       run_at, created_at, worker, lease_expires_at, result, error, dedupe_key,
       started_at, finished_at, cancel_requested, lease_seconds, lease_token, estimate
  FROM claim_tasks(CAST(:available AS bigint), CAST(:limit AS integer), CAST(:queues AS text[]),
                   CAST(:worker AS text), CAST(:lease AS double precision), CAST(:descending AS boolean),
                   CAST(:peek AS boolean));

-- name: heartbeat_task
-- Extends a lease only for the holder of the current claim (token match).
-- No row back means the lease is lost.
UPDATE tasks
   SET lease_expires_at = now() + make_interval(secs => COALESCE(CAST(:lease AS double precision), lease_seconds))
 WHERE id = :id AND lease_token = CAST(:token AS uuid) AND state = 'running'
RETURNING lease_expires_at, cancel_requested;

-- name: heartbeat_tasks
-- Batched heartbeat for a worker's running tasks: one round trip.
-- Rows missing from the result have lost their lease.
UPDATE tasks t
   SET lease_expires_at = now() + make_interval(secs => COALESCE(CAST(:lease AS double precision), t.lease_seconds))
  FROM unnest(CAST(:ids AS bigint[]), CAST(:tokens AS uuid[])) AS h(id, token)
 WHERE t.id = h.id AND t.lease_token = h.token AND t.state = 'running'
RETURNING t.id, t.lease_expires_at, t.cancel_requested;

-- name: complete_task
-- Ends the current claim as done (or cancelled if cancel was requested) and
-- releases its pool slot in the same statement. The slot is released only
-- when the task row matched, so a second completion releases nothing. One
-- task in eight (by id) adds its run time to the queue's learnt estimate (see
-- complete_tasks): an upsert per completion added a fifth to this statement,
-- and a sample of the same stream estimates the same mean.
WITH done AS (
    UPDATE tasks
       SET state = CASE WHEN cancel_requested THEN 'cancelled' ELSE 'done' END,
           result = CAST(:result AS jsonb),
           finished_at = now(),
           lease_token = NULL,
           lease_expires_at = NULL
     WHERE id = :id AND lease_token = CAST(:token AS uuid) AND state = 'running'
    RETURNING id, state, pool, queue, EXTRACT(EPOCH FROM finished_at - started_at) AS seconds
), learnt AS (
    INSERT INTO queue_estimates AS e (queue, slot, finished, mean_seconds)
    SELECT done.queue, pg_backend_pid() % 8, 1, GREATEST(done.seconds, 0)
      FROM done WHERE done.state = 'done' AND done.seconds IS NOT NULL AND done.id % 8 = 0
    ON CONFLICT (queue, slot) DO UPDATE
       SET finished = e.finished + 1,
           mean_seconds = e.mean_seconds + (EXCLUDED.mean_seconds - e.mean_seconds) * 0.1,
           updated_at = now()
), released AS (
    UPDATE pools p SET running = p.running - 1
      FROM done WHERE p.name = done.pool
    RETURNING p.running, p.running_limit
)
SELECT done.id, done.state,
       COALESCE((SELECT r.running_limit IS NOT NULL AND r.running + 1 >= r.running_limit FROM released r), false)
           AS freed_full_pool
  FROM done;

-- name: complete_tasks
-- Batched completion: many claims end as done in one statement and one
-- commit, each matched on its own lease token (rows missing from the result
-- lost their lease). The caller releases the pools of the returned rows in
-- name order (lock_pools, release_pools), so batches cannot deadlock.
-- The batch's run times (finished_at - started_at of the tasks done) fold
-- into the queue's learnt estimate, one row per queue and slot: an
-- exponentially weighted mean, weight 0.1 per task. The slot is the backend's
-- pid mod 8, so concurrent completions rarely wait on the same row, and the
-- rows are locked in queue order, so two batches cannot deadlock on them.
WITH done AS (
    UPDATE tasks t
       SET state = CASE WHEN t.cancel_requested THEN 'cancelled' ELSE 'done' END,
           result = CAST(c.result AS jsonb),
           finished_at = now(),
           lease_token = NULL,
           lease_expires_at = NULL
      FROM unnest(CAST(:ids AS bigint[]), CAST(:tokens AS uuid[]), CAST(:results AS text[])) AS c(id, token, result)
     WHERE t.id = c.id AND t.lease_token = c.token AND t.state = 'running'
    RETURNING t.id, t.state, t.pool, t.queue, EXTRACT(EPOCH FROM t.finished_at - t.started_at) AS seconds
), learnt AS (
    INSERT INTO queue_estimates AS e (queue, slot, finished, mean_seconds)
    SELECT done.queue, pg_backend_pid() % 8, count(*), GREATEST(avg(done.seconds), 0)
      FROM done WHERE done.state = 'done' AND done.seconds IS NOT NULL
     GROUP BY done.queue ORDER BY done.queue
    ON CONFLICT (queue, slot) DO UPDATE
       SET finished = e.finished + EXCLUDED.finished,
           mean_seconds = e.mean_seconds
                          + (EXCLUDED.mean_seconds - e.mean_seconds) * (1 - power(0.9, EXCLUDED.finished)),
           updated_at = now()
)
SELECT id, state, pool FROM done;

-- name: fail_task
-- Ends the current claim with an error: a retry at now() + retry_in while
-- attempts remain and retry is allowed, else failed (or cancelled if a cancel
-- was requested). Releases the pool slot in the same statement.
WITH failed AS (
    UPDATE tasks
       SET state = CASE
                     WHEN cancel_requested THEN 'cancelled'
                     WHEN CAST(:retry AS boolean) AND attempts < max_attempts THEN
                          CASE WHEN CAST(:retry_in AS double precision) > 0 THEN 'scheduled' ELSE 'queued' END
                     ELSE 'failed'
                   END,
           run_at = CASE
                      WHEN NOT cancel_requested AND CAST(:retry AS boolean) AND attempts < max_attempts
                        THEN now() + make_interval(secs => CAST(:retry_in AS double precision))
                      ELSE run_at
                    END,
           finished_at = CASE
                           WHEN NOT cancel_requested AND CAST(:retry AS boolean) AND attempts < max_attempts THEN NULL
                           ELSE now()
                         END,
           error = :error,
           lease_token = NULL,
           lease_expires_at = NULL
     WHERE id = :id AND lease_token = CAST(:token AS uuid) AND state = 'running'
    RETURNING id, state, pool, run_at
), released AS (
    UPDATE pools p SET running = p.running - 1
      FROM failed WHERE p.name = failed.pool
    RETURNING p.running, p.running_limit
)
SELECT failed.id, failed.state, failed.run_at,
       COALESCE((SELECT r.running_limit IS NOT NULL AND r.running + 1 >= r.running_limit FROM released r), false)
           AS freed_full_pool
  FROM failed;

-- name: requeue_task
-- Gives a running task back without using up an attempt (worker shutdown
-- after its grace period). Token-checked; releases the pool slot.
WITH back AS (
    UPDATE tasks
       SET state = CASE WHEN cancel_requested THEN 'cancelled' ELSE 'queued' END,
           finished_at = CASE WHEN cancel_requested THEN now() ELSE NULL END,
           attempts = GREATEST(attempts - 1, 0),
           run_at = now(),
           error = :error,
           lease_token = NULL,
           lease_expires_at = NULL
     WHERE id = :id AND lease_token = CAST(:token AS uuid) AND state = 'running'
    RETURNING id, state, pool
), released AS (
    UPDATE pools p SET running = p.running - 1
      FROM back WHERE p.name = back.pool
    RETURNING p.name
)
SELECT back.id, back.state, (SELECT count(*) FROM released) AS released FROM back;

-- name: rescue_expired_tasks
-- Every running task whose lease has expired, re-checked under the row lock
-- (FOR UPDATE re-evaluates the WHERE on the newest row version), goes back to
-- queued, or to failed when its attempts are used up. Rows held by a
-- concurrent completion are skipped: that completion wins. The caller then
-- releases the returned pools, locking them in name order.
WITH expired AS (
    SELECT id FROM tasks
     WHERE state = 'running' AND lease_expires_at < now()
     ORDER BY id
     FOR UPDATE SKIP LOCKED
), rescued AS (
    UPDATE tasks t
       SET state = CASE
                     WHEN t.cancel_requested THEN 'cancelled'
                     WHEN t.attempts >= t.max_attempts THEN 'failed'
                     ELSE 'queued'
                   END,
           finished_at = CASE WHEN t.cancel_requested OR t.attempts >= t.max_attempts THEN now() ELSE NULL END,
           run_at = now(),
           error = 'lease expired at ' || t.lease_expires_at::text || ' (worker ' || t.worker || ')',
           lease_token = NULL,
           lease_expires_at = NULL
      FROM expired
     WHERE t.id = expired.id AND t.state = 'running' AND t.lease_expires_at < now()
    RETURNING t.id, t.pool, t.state
)
SELECT id, pool, state FROM rescued;

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

-- name: cancel_task
-- Queued or scheduled: cancelled now. Running: a request the holder sees on
-- its next heartbeat; its complete/fail then ends the task cancelled.
UPDATE tasks
   SET state = CASE WHEN state = 'running' THEN state ELSE 'cancelled' END,
       finished_at = CASE WHEN state = 'running' THEN finished_at ELSE now() END,
       cancel_requested = true
 WHERE id = :id AND state IN ('queued', 'scheduled', 'running')
RETURNING id, state;

-- name: get_task
-- A scheduled task whose run_at has passed is reported as queued: it is
-- claimable, and the next claim will promote it.
SELECT id, queue, payload, priority, required, pool,
       CASE WHEN state = 'scheduled' AND run_at <= now() THEN 'queued' ELSE state END AS state,
       attempts, max_attempts, run_at, created_at, worker, lease_expires_at, result, error,
       dedupe_key, started_at, finished_at, cancel_requested, lease_seconds, NULL::uuid AS lease_token, estimate
  FROM tasks WHERE id = :id;

-- name: list_tasks
-- Newest first, filtered by state and queue when given.
SELECT id, queue, payload, priority, required, pool,
       CASE WHEN state = 'scheduled' AND run_at <= now() THEN 'queued' ELSE state END AS state,
       attempts, max_attempts, run_at, created_at, worker, lease_expires_at, result, error,
       dedupe_key, started_at, finished_at, cancel_requested, lease_seconds, NULL::uuid AS lease_token, estimate
  FROM tasks
 WHERE (CAST(:state AS text) IS NULL
        OR CASE WHEN state = 'scheduled' AND run_at <= now() THEN 'queued' ELSE state END = CAST(:state AS text))
   AND (CAST(:queue AS text) IS NULL OR queue = CAST(:queue AS text))
 ORDER BY id DESC
 LIMIT :limit;

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

-- name: queue_estimates
-- The learnt run time of each queue: its slots' means, weighted by how many
-- tasks each has seen (at most 1000, so an old busy slot does not outvote the
-- others forever). A handful of rows per queue: cheap to read every round.
SELECT queue, sum(LEAST(finished, 1000) * mean_seconds) / sum(LEAST(finished, 1000)) AS seconds,
       sum(finished) AS finished
  FROM queue_estimates
 WHERE CAST(:queues AS text[]) IS NULL OR queue = ANY (CAST(:queues AS text[]))
 GROUP BY queue ORDER BY queue;

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

-- name: try_advisory_lock
SELECT pg_try_advisory_lock(:key) AS locked;

-- name: advisory_unlock
SELECT pg_advisory_unlock(:key) AS unlocked;

-- name: holds_advisory_lock
-- Whether this session still holds the session-level advisory lock :key (a
-- bigint key shows in pg_locks as classid = high half, objid = low half,
-- objsubid = 1). The maintenance leader asks on its own connection before each
-- round, so it never acts on a leadership that died with its session.
SELECT EXISTS (
    SELECT 1 FROM pg_locks
     WHERE locktype = 'advisory' AND pid = pg_backend_pid() AND granted AND objsubid = 1
       AND classid = CAST((CAST(:key AS bigint) >> 32) & 4294967295 AS oid)
       AND objid = CAST(CAST(:key AS bigint) & 4294967295 AS oid)
) AS held;

-- name: set_idle_session_timeout
-- The maintenance leader's session ends itself after this long idle (PG 14+),
-- so a frozen (SIGSTOPped) leader cannot keep its advisory lock forever; a
-- live leader touches its session every round, well within the timeout.
SELECT set_config('idle_session_timeout', :value, false) AS value;

-- name: advisory_xact_lock
SELECT pg_advisory_xact_lock(:key);

-- name: set_local_search_path
-- Used on a caller's connection (transactional enqueue): lasts until the end
-- of the caller's transaction unless restored.
SELECT set_config('search_path', :path, true) AS previous;

-- name: show_search_path
SELECT current_setting('search_path') AS path;

-- The invariant checks read the views of migrations/functions/invariant_*.vN.sql,
-- so `TaskQueue.check()` and an operator's SELECT can never disagree.
-- TaskQueue.check() runs them together in one REPEATABLE READ snapshot.

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

-- name: set_read_only
-- The rest of this transaction may not write (peek proves it writes nothing).
SET TRANSACTION READ ONLY;

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

-- name: unpark_open_pool_tasks
-- Repair: parked tasks whose pool has room (or no row) go back into the claim
-- index. The pool trigger does this on every release; this catches a pool
-- emptied behind its back (TRUNCATE, or a hand-edited row with triggers off).
UPDATE tasks t SET parked = false
 WHERE t.parked AND t.state = 'queued'
   AND NOT EXISTS (SELECT 1 FROM pools p
                    WHERE p.name = t.pool AND p.running_limit IS NOT NULL AND p.running >= p.running_limit)
RETURNING t.id, t.pool;

-- name: delete_all_tasks
-- The demo starts from an empty queue in its own schema (never a user's):
-- tasks and pools go together so no pool count outlives its tasks.
DELETE FROM tasks;

-- name: delete_all_pools
-- See delete_all_tasks; run in the same transaction, after it.
DELETE FROM pools;

-- name: retry_task
-- An operator's retry of a failed task: back to queued with a fresh attempt
-- budget (attempts 0, max_attempts kept) and run_at now, in one statement.
-- Only a failed task qualifies; a task in any other state returns no row.
-- The last error stays for the record until the next attempt ends. It goes
-- in unparked, as an enqueue does: a claim parks it if its pool is full.
-- A live task holding the same dedupe key makes uq_tasks_dedupe refuse it.
UPDATE tasks
   SET state = 'queued',
       attempts = 0,
       run_at = now(),
       finished_at = NULL,
       result = NULL,
       cancel_requested = false,
       parked = false
 WHERE id = :id AND state = 'failed'
RETURNING id, queue;
