-- A parked task's pool exists and is full: otherwise the task is stranded
-- out of the claim index. check --repair unparks such tasks.
CREATE OR REPLACE VIEW invariant_parked_in_open_pool AS
SELECT 'parked_in_open_pool'::text AS check_name,
       'violation'::text AS severity,
       'task ' || t.id AS subject,
       'task ' || t.id || ' is parked but its pool ' || t.pool
           || CASE WHEN p.name IS NULL THEN ' has no row' ELSE ' has a free slot' END AS description,
       t.id AS task_id,
       t.pool,
       p.running_limit,
       p.running
  FROM tasks t
  LEFT JOIN pools p ON p.name = t.pool
 WHERE t.state = 'queued' AND t.parked
   AND (p.name IS NULL OR p.running_limit IS NULL OR p.running < p.running_limit);
