-- Every claim promotes the due scheduled tasks, so a task overdue by more than
-- 5 seconds means nobody claimed since it fell due (a warning: are workers
-- running?), or, if some task was claimed 5 seconds or more after it fell due,
-- that the promotion failed (a violation).
CREATE OR REPLACE VIEW invariant_overdue_scheduled AS
WITH overdue AS (
    SELECT t.id, t.queue, t.run_at
      FROM tasks t
     WHERE t.state = 'scheduled' AND t.run_at < now() - interval '5 seconds'
), last_claim AS (
    SELECT GREATEST(
               (SELECT max(r.started_at) FROM tasks r WHERE r.state = 'running'),
               (SELECT max(f.started_at) FROM tasks f
                 WHERE f.finished_at >= (SELECT min(o.run_at) FROM overdue o) + interval '5 seconds')
           ) AS at
)
SELECT 'overdue_scheduled'::text AS check_name,
       CASE WHEN c.at >= o.run_at + interval '5 seconds' THEN 'violation' ELSE 'warning' END AS severity,
       'task ' || o.id AS subject,
       'task ' || o.id || ' in queue ' || o.queue || ' is still scheduled '
           || to_char(now() - o.run_at, 'FMHH24:MI:SS') || ' after its run_at'
           || CASE WHEN c.at >= o.run_at + interval '5 seconds'
                   THEN ', although a claim ran since'
                   ELSE '; no claim ran since: are workers running?'
              END AS description,
       o.id AS task_id,
       o.queue,
       o.run_at,
       c.at AS last_claim_at
  FROM overdue o CROSS JOIN last_claim c;
