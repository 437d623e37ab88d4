-- What taskqueue.testing asks of a test's queue: the tasks an assertion
-- looks for, and scheduled tasks made due so a drain need not wait for them.
-- Tables are unqualified: each connection's search_path is the queue schema.
-- Every value is a bound parameter; no name is ever pasted into SQL.

-- name: find_tasks
-- Every filter is optional (NULL: any). States are the ones reads report (a
-- due scheduled task is queued). A payload matches by JSON containment, so a
-- test names only the keys it cares about. Oldest first: the order in which
-- they were enqueued.
SELECT * FROM (
-- compose: _task_rows
) AS t
 WHERE (CAST(:states AS text[]) IS NULL OR t.state = ANY(CAST(:states AS text[])))
   AND (CAST(:queue AS text) IS NULL OR t.queue = CAST(:queue AS text))
   AND (CAST(:payload AS jsonb) IS NULL OR t.payload @> CAST(:payload AS jsonb))
   AND (CAST(:priority AS integer) IS NULL OR t.priority = CAST(:priority AS integer))
   AND (CAST(:required AS integer) IS NULL OR t.required = CAST(:required AS integer))
   AND (CAST(:pool AS text) IS NULL OR t.pool = CAST(:pool AS text))
   AND (CAST(:dedupe_key AS text) IS NULL OR t.dedupe_key = CAST(:dedupe_key AS text))
 ORDER BY t.id
 LIMIT :limit;

-- name: make_scheduled_due
-- drain(with_scheduled=True): what waits for its run_at (a delay, a retry's
-- backoff) runs now. The next claim promotes it, as it would at its time.
UPDATE tasks SET run_at = now()
 WHERE state = 'scheduled' AND run_at > now()
   AND (CAST(:queues AS text[]) IS NULL OR queue = ANY(CAST(:queues AS text[])));
