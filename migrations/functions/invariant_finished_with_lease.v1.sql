-- No task that is not running still holds a lease.
CREATE OR REPLACE VIEW invariant_finished_with_lease AS
SELECT 'finished_with_lease'::text AS check_name,
       'violation'::text AS severity,
       'task ' || t.id AS subject,
       'task ' || t.id || ' is ' || t.state || ' but still holds a lease' AS description,
       t.id AS task_id,
       t.state,
       t.lease_token IS NOT NULL AS has_lease_token,
       t.lease_expires_at
  FROM tasks t
 WHERE t.state <> 'running'
   AND (t.lease_token IS NOT NULL OR t.lease_expires_at IS NOT NULL);
