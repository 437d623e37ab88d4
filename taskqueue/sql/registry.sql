-- The worker registry and reservations (migrations/versions/0005_worker_registry.py).
-- taskqueue/store/registry.py uses them. A worker row whose expires_at has passed
-- is a dead worker's: every read here ignores it, and so its reservation.

-- name: register_worker
-- Registration and heartbeat in one upsert, so a worker whose row was deleted
-- while it was paused simply appears again. started_at restarts only when the
-- name comes back after its row had expired (a new process under an old name).
INSERT INTO workers (name, host, pid, queues, capacity, in_use, running, policy,
                     started_at, last_seen_at, expires_at)
VALUES (:name, :host, :pid, CAST(:queues AS text[]), :capacity, :in_use, :running, :policy,
        now(), now(), now() + make_interval(secs => CAST(:ttl AS double precision)))
ON CONFLICT (name) DO UPDATE
   SET host = EXCLUDED.host, pid = EXCLUDED.pid, queues = EXCLUDED.queues,
       capacity = EXCLUDED.capacity, in_use = EXCLUDED.in_use, running = EXCLUDED.running,
       policy = EXCLUDED.policy,
       started_at = CASE WHEN workers.expires_at < now() THEN now() ELSE workers.started_at END,
       last_seen_at = now(), expires_at = EXCLUDED.expires_at
RETURNING started_at;

-- name: unregister_worker
-- A clean shutdown: the row goes, and its reservation with it (ON DELETE CASCADE).
DELETE FROM workers WHERE name = :name;

-- name: list_workers
-- Live workers (and dead ones still on record when :include_dead), each with
-- its reservation if it holds one.
SELECT w.name, w.host, w.pid, w.queues, w.capacity, w.in_use, w.running, w.policy,
       w.started_at, w.last_seen_at, w.expires_at, w.expires_at > now() AS alive,
       r.task_id AS reserved_task_id, r.required AS reserved_required, r.queue AS reserved_queue,
       r.since AS reserved_since, r.start_by AS reserved_start_by
  FROM workers w
  LEFT JOIN reservations r ON r.worker = w.name
 WHERE CAST(:include_dead AS boolean) OR w.expires_at > now()
 ORDER BY w.name;

-- name: delete_dead_workers
-- Maintenance: rows of workers dead for longer than :keep seconds, in one
-- statement; their reservations go with them. Reads ignored them already.
DELETE FROM workers
 WHERE expires_at < now() - make_interval(secs => CAST(:keep AS double precision))
RETURNING name;

-- name: set_reservation
-- A worker's one reservation, replaced in place. since stays when it is the
-- same task, so the age of a reservation is how long the task has been held for.
-- Only a live worker's row can reserve (the INSERT reads its registry row).
INSERT INTO reservations (worker, task_id, required, queue, since, start_by)
SELECT w.name, :task_id, :required, :queue, now(),
       now() + make_interval(secs => CAST(:start_in AS double precision))
  FROM workers w WHERE w.name = :worker AND w.expires_at > now()
ON CONFLICT (worker) DO UPDATE
   SET task_id = EXCLUDED.task_id, required = EXCLUDED.required, queue = EXCLUDED.queue,
       since = CASE WHEN reservations.task_id = EXCLUDED.task_id THEN reservations.since ELSE now() END,
       start_by = EXCLUDED.start_by
RETURNING task_id;

-- name: clear_reservation
DELETE FROM reservations WHERE worker = :worker;

-- name: list_reservations
-- Reservations of live workers, oldest first: when two workers reserved the
-- same task, the one that reserved it first holds it (ties by worker name).
SELECT r.worker, r.task_id, r.required, r.queue, r.since, r.start_by
  FROM reservations r
  JOIN workers w ON w.name = r.worker
 WHERE w.expires_at > now()
 ORDER BY r.since, r.worker;

-- name: waiting_heads
-- The first :limit claimable tasks in claim order (migrations/functions/
-- waiting_heads.v1.sql), each with the live worker that reserved it first, if
-- any, and its queue's learnt run time, for one claim round's plan.
SELECT h.id, h.queue, h.priority, h.required, h.estimate, o.worker AS reserved_by, l.seconds AS learnt
  FROM waiting_heads(CAST(:queues AS text[]), CAST(:limit AS integer), CAST(:descending AS boolean))
       WITH ORDINALITY AS h(id, queue, priority, required, estimate, ord)
  LEFT JOIN LATERAL (
       SELECT r.worker FROM reservations r JOIN workers w ON w.name = r.worker
        WHERE r.task_id = h.id AND w.expires_at > now()
        ORDER BY r.since, r.worker LIMIT 1) o ON true
  LEFT JOIN LATERAL (
       SELECT sum(LEAST(e.finished, 1000) * e.mean_seconds) / sum(LEAST(e.finished, 1000)) AS seconds
         FROM queue_estimates e WHERE e.queue = h.queue) l ON true
 ORDER BY h.ord;

-- name: queue_estimates
-- The learnt run time of each queue: its slots' means, weighted by how many
-- tasks each has seen (at most 1000, so an old busy slot does not outvote the
-- others forever). A handful of rows per queue: cheap to read every round.
SELECT queue, sum(LEAST(finished, 1000) * mean_seconds) / sum(LEAST(finished, 1000)) AS seconds,
       sum(finished) AS finished
  FROM queue_estimates
 WHERE CAST(:queues AS text[]) IS NULL OR queue = ANY (CAST(:queues AS text[]))
 GROUP BY queue ORDER BY queue;
