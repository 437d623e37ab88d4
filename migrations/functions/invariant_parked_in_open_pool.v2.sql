-- A parked task's pool exists and is full, or the pool has parked_open set
-- and `room` unparked, queued tasks of the same pool and queue come before
-- the task in both claim orders and need no more than it does (see
-- unpark_behind): otherwise the task is stranded out of the claim index,
-- where a claim it would fit should have found it. check --repair unparks
-- such tasks.
CREATE OR REPLACE VIEW invariant_parked_in_open_pool AS
SELECT 'parked_in_open_pool'::text AS check_name,
       'violation'::text AS severity,
       'task ' || t.id AS subject,
       'task ' || t.id || ' is parked but its pool ' || t.pool
           || CASE WHEN p.name IS NULL THEN ' has no row'
                   WHEN p.running_limit IS NULL THEN ' has no limit'
                   WHEN NOT p.parked_open THEN ' has a free slot'
                   ELSE ' has ' || (p.running_limit - p.running)
                        || ' free slots and fewer unparked tasks ahead of it that need no more' END AS description,
       t.id AS task_id,
       t.pool,
       p.running_limit,
       p.running
  FROM tasks t
  LEFT JOIN pools p ON p.name = t.pool
 WHERE t.state = 'queued' AND t.parked
   AND (p.name IS NULL OR p.running_limit IS NULL OR p.running < p.running_limit)
   AND (p.name IS NULL OR p.running_limit IS NULL OR NOT p.parked_open
        OR t.id IN (SELECT parked_out_of_reach()));
