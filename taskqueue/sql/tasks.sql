-- The life of a task: enqueue, claim, heartbeat, complete, fail, release, rescue.
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
-- newest version is the one in use). The columns are Task's fields in their
-- order, read as tuples: Task(*row), no dict per row (a claim of 500 rows
-- spent about a tenth of its Python time on dicts); the token as text, not
-- a uuid.UUID to format again.
SELECT id, queue, payload, priority, required, pool, state, attempts, max_attempts,
       run_at, created_at, worker, lease_expires_at, result, error, dedupe_key,
       started_at, finished_at, cancel_requested, lease_seconds, estimate, lease_token::text AS lease_token
  FROM claim_tasks(CAST(:available AS bigint), CAST(:limit AS integer), CAST(:queues AS text[]),
                   CAST(:worker AS text), CAST(:lease AS double precision), CAST(:descending AS boolean),
                   CAST(:peek AS boolean));

-- name: heartbeat_task
-- Extends a lease only for the holder of the current claim (token match).
-- No row back means the lease is lost.
-- Every statement that ends or extends a claim matches it by id and token
-- alone, never by state = 'running' too: ck_tasks_idle_has_no_lease already
-- makes a row with a token a running one, and the state test let the planner
-- read ix_tasks_running instead of the primary key. After statistics taken
-- while little was running (a quiet moment, a fresh table), each completion
-- then read every running task: 10,000 running, 499 buffers and 2.3 ms a
-- completion, where the primary key reads 4.
UPDATE tasks
   SET lease_expires_at = now() + make_interval(secs => COALESCE(CAST(:lease AS double precision), lease_seconds))
 WHERE id = :id AND lease_token = CAST(:token AS uuid)
RETURNING lease_expires_at, cancel_requested;

-- name: heartbeat_tasks
-- Batched heartbeat for a worker's running tasks: one round trip.
-- Rows missing from the result have lost their lease.
UPDATE tasks t
   SET lease_expires_at = now() + make_interval(secs => COALESCE(CAST(:lease AS double precision), t.lease_seconds))
  FROM unnest(CAST(:ids AS bigint[]), CAST(:tokens AS uuid[])) AS h(id, token)
 WHERE t.id = h.id AND t.lease_token = h.token
RETURNING t.id, t.lease_expires_at, t.cancel_requested;

-- name: complete_task
-- Ends the current claim as done (or cancelled if cancel was requested) and
-- releases its pool slot in the same statement (_release_pool_slot). The slot
-- is released only when the task row matched, so a second completion
-- releases nothing. One task in :sample (by id; the caller passes
-- store/tasks.py's ESTIMATE_SAMPLE, which also decides complete_task_alone)
-- adds its run time to the queue's learnt estimate (see complete_tasks): an
-- upsert per completion added a fifth to this statement, and a sample of the
-- same stream estimates the same mean.
WITH ended AS (
-- compose: _end_claim_as_done
    RETURNING id, state, pool, run_at, queue, EXTRACT(EPOCH FROM finished_at - started_at) AS seconds
), learnt AS (
    INSERT INTO queue_estimates AS e (queue, slot, finished, mean_seconds)
    SELECT ended.queue, pg_backend_pid() % 8, 1, GREATEST(ended.seconds, 0)
      FROM ended WHERE ended.state = 'done' AND ended.seconds IS NOT NULL
       AND ended.id % CAST(:sample AS integer) = 0
    ON CONFLICT (queue, slot) DO UPDATE
       SET finished = e.finished + 1,
           mean_seconds = e.mean_seconds + (EXCLUDED.mean_seconds - e.mean_seconds) * 0.1,
           updated_at = now()
)
-- compose: _release_pool_slot

-- name: complete_task_pooled
-- complete_task for a pooled task whose run time is not sampled for the
-- estimate (decided by the caller, as for complete_task_alone): the claim
-- ends and its pool's slot is released in one statement, without the CTE on
-- queue_estimates, whose INSERT ... ON CONFLICT opens that table and its
-- index in every statement, whether it adds a row or not. A pool the task
-- does not have (NULL) releases nothing, as in complete_task.
WITH ended AS (
-- compose: _end_claim_as_done
    RETURNING id, state, pool, run_at
)
-- compose: _release_pool_slot

-- name: complete_task_alone
-- complete_task for the common case, as one plain UPDATE: a task with no
-- pool whose run time is not sampled for the estimate (decided by the
-- caller, with the sample it passes complete_task). complete_task's CTEs on
-- queue_estimates and pools open those tables even when they change nothing,
-- about 115k of 1.7M server instructions a claim + complete. It matches only a row with no pool, so no
-- pool slot is ever left taken; when it matches nothing (a lost lease, or a
-- pool the caller did not know of) the caller runs complete_task, which
-- tells those apart.
-- compose: _end_claim_as_done
   AND pool IS NULL
RETURNING id, state, run_at;

-- name: _end_claim_as_done
-- Ends a claim as done (cancelled if cancel was requested), matched on its
-- lease token: complete_task and complete_task_alone.
UPDATE tasks
   SET state = CASE WHEN cancel_requested THEN 'cancelled' ELSE 'done' END,
       result = CAST(:result AS jsonb),
       finished_at = now(),
       lease_token = NULL,
       lease_expires_at = NULL
 WHERE id = :id AND lease_token = CAST(:token AS uuid)

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
     WHERE t.id = c.id AND t.lease_token = c.token
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
WITH ended AS (
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
     WHERE id = :id AND lease_token = CAST(:token AS uuid)
    RETURNING id, state, pool, run_at
)
-- compose: _release_pool_slot

-- name: requeue_task
-- Gives a running task back without using up an attempt (worker shutdown
-- after its grace period). Token-checked; releases the pool slot.
WITH ended AS (
    UPDATE tasks
       SET state = CASE WHEN cancel_requested THEN 'cancelled' ELSE 'queued' END,
           finished_at = CASE WHEN cancel_requested THEN now() ELSE NULL END,
           attempts = GREATEST(attempts - 1, 0),
           run_at = now(),
           error = :error,
           lease_token = NULL,
           lease_expires_at = NULL
     WHERE id = :id AND lease_token = CAST(:token AS uuid)
    RETURNING id, state, pool, run_at
)
-- compose: _release_pool_slot

-- name: _release_pool_slot
-- Not a statement: the tail that complete_task, fail_task and requeue_task
-- share (the loader appends it where a statement says "compose"). The CTE
-- "ended" holds the one task row whose claim just ended; its pool loses one
-- running task, and freed_full_pool says whether that pool was full before.
-- When it was, or when the task is claimable again at once, the statement
-- wakes the listening workers itself (pg_notify, delivered at commit): one
-- round trip and one commit, where a separate NOTIFY cost a second of each.
, released AS (
    UPDATE pools p SET running = p.running - 1
      FROM ended WHERE p.name = ended.pool
    RETURNING p.running, p.running_limit
), outcome AS (
    SELECT ended.id, ended.state, ended.run_at,
           COALESCE((SELECT r.running_limit IS NOT NULL AND r.running + 1 >= r.running_limit FROM released r), false)
               AS freed_full_pool
      FROM ended
)
SELECT o.id, o.state, o.run_at, o.freed_full_pool,
       CASE WHEN o.freed_full_pool OR o.state = 'queued'
            THEN (SELECT true FROM pg_notify(CAST(:channel AS text), '')) ELSE false END AS woke
  FROM outcome o;

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

-- name: cancel_task
-- Queued or scheduled: cancelled now. Running: a request the holder sees on
-- its next heartbeat; its complete/fail then ends the task cancelled.
-- A cancelled task is no longer parked (only a queued one is). A queued task
-- of a pool with room and parked tasks may be what some of them wait behind
-- (unpark_behind): one more layer is put back. The pool's row is locked
-- before that layer's tasks, the order a release takes them in (an UPDATE
-- computes its new values before it locks the row, so "owner" locks first).
WITH cancelled AS (
    UPDATE tasks
       SET state = CASE WHEN state = 'running' THEN state ELSE 'cancelled' END,
           finished_at = CASE WHEN state = 'running' THEN finished_at ELSE now() END,
           parked = CASE WHEN state = 'running' THEN parked ELSE false END,
           cancel_requested = true
     WHERE id = :id AND state IN ('queued', 'scheduled', 'running')
    RETURNING id, state, pool
), owner AS (
    SELECT p.name FROM pools p JOIN cancelled c ON p.name = c.pool
     WHERE c.state = 'cancelled' AND p.parked_open AND p.running < p.running_limit
       FOR UPDATE OF p
), reopened AS (
    UPDATE pools p SET parked_open = unpark_behind(p.name, 1)
      FROM owner o
     WHERE p.name = o.name AND p.parked_open AND p.running < p.running_limit
)
SELECT id, state FROM cancelled;

-- name: retry_task
-- An operator's retry of a failed task: back to queued with a fresh attempt
-- budget (attempts 0, max_attempts kept) and run_at now, in one statement.
-- Only a failed task qualifies; a task in any other state returns no row.
-- The last error stays for the record until the next attempt ends. It goes
-- in unparked, as an enqueue does: a claim parks it if its pool is full.
-- A live task holding the same dedupe key makes uq_tasks_dedupe refuse it.
-- COLLATE "C" (the same equality) keeps ix_tasks_errored, whose predicate
-- state = 'failed' would otherwise prove, from standing in for the primary
-- key when its statistics were taken with few failures.
UPDATE tasks
   SET state = 'queued',
       attempts = 0,
       run_at = now(),
       finished_at = NULL,
       result = NULL,
       cancel_requested = false,
       parked = false
 WHERE id = :id AND state = 'failed' COLLATE "C"
RETURNING id, queue;
