-- Only a queued task is parked: one that is running, scheduled or finished
-- and still parked goes back to the queue parked (a rescue, a retry, a
-- promotion), out of the claim index while its pool may have room.
-- claim_tasks before version 24 could start a task it had just parked.
-- check --repair clears the flag.
CREATE OR REPLACE VIEW invariant_parked_not_queued AS
SELECT 'parked_not_queued'::text AS check_name,
       'violation'::text AS severity,
       'task ' || t.id AS subject,
       'task ' || t.id || ' is ' || t.state || ' but parked' AS description,
       t.id AS task_id,
       t.state,
       t.pool
  FROM tasks t
 WHERE t.parked AND t.state <> 'queued';
