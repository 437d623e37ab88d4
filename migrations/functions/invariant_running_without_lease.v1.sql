-- Every running task has a lease (token and expiry) and a worker.
CREATE OR REPLACE VIEW invariant_running_without_lease AS
SELECT 'running_without_lease'::text AS check_name,
       'violation'::text AS severity,
       'task ' || t.id AS subject,
       'task ' || t.id || ' is running without '
           || concat_ws(', ',
                        CASE WHEN t.lease_token IS NULL THEN 'a lease token' END,
                        CASE WHEN t.lease_expires_at IS NULL THEN 'a lease expiry' END,
                        CASE WHEN t.worker IS NULL THEN 'a worker' END) AS description,
       t.id AS task_id,
       t.worker,
       t.lease_token IS NOT NULL AS has_lease_token,
       t.lease_expires_at
  FROM tasks t
 WHERE t.state = 'running'
   AND (t.lease_token IS NULL OR t.lease_expires_at IS NULL OR t.worker IS NULL);
