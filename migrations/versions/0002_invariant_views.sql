-- The invariant checks, as views: each returns the rows that break one
-- invariant, so an operator can run `SELECT * FROM <schema>.invariant_violations`
-- without Python. TaskQueue.check() reads the same views in one snapshot.
--
-- Every view has the columns check_name, severity ('violation' or 'warning'),
-- subject and description, then columns of its own. Lease tokens are shown
-- only as present or not: a token is its holder's secret.

-- A pool's stored running count must equal the number of its running tasks.
-- The full join also catches running tasks whose pool row is missing.
CREATE VIEW invariant_pool_counts AS
WITH actual AS (
    SELECT t.pool, count(*) AS n
      FROM tasks t
     WHERE t.state = 'running' AND t.pool IS NOT NULL
     GROUP BY t.pool
)
SELECT 'pool_counts'::text AS check_name,
       'violation'::text AS severity,
       COALESCE(p.name, a.pool) AS subject,
       CASE WHEN p.name IS NULL
            THEN 'pool ' || a.pool || ' has no row but ' || a.n || ' running task(s)'
            ELSE 'pool ' || p.name || ' stores running = ' || p.running || ' but has '
                 || COALESCE(a.n, 0) || ' running task(s)'
       END AS description,
       COALESCE(p.name, a.pool) AS pool,
       p.running AS stored_running,
       COALESCE(a.n, 0) AS actual_running
  FROM pools p
  FULL JOIN actual a ON a.pool = p.name
 WHERE p.name IS NULL OR p.running <> COALESCE(a.n, 0);

-- No pool runs more tasks than its limit. Lowering a limit never stops running
-- tasks, so a pool may stay over a lowered limit until they finish: that is a
-- warning. It is a violation when the tasks claimed since the limit was last
-- set (started_at >= limit_changed_at) alone exceed it, because every one of
-- those claims saw the new limit.
CREATE VIEW invariant_pool_over_limit AS
WITH actual AS (
    SELECT t.pool, count(*) AS n, array_agg(t.started_at) AS started
      FROM tasks t
     WHERE t.state = 'running' AND t.pool IS NOT NULL
     GROUP BY t.pool
), judged AS (
    SELECT p.name, p.running_limit, p.running, p.limit_changed_at,
           COALESCE(a.n, 0) AS actual_running,
           (SELECT count(*) FROM unnest(a.started) AS s(at)
             WHERE s.at >= COALESCE(p.limit_changed_at, '-infinity'::timestamptz)) AS claimed_under_limit
      FROM pools p
      LEFT JOIN actual a ON a.pool = p.name
     WHERE p.running_limit IS NOT NULL
       AND GREATEST(p.running, COALESCE(a.n, 0)) > p.running_limit
)
SELECT 'pool_over_limit'::text AS check_name,
       CASE WHEN j.claimed_under_limit > j.running_limit THEN 'violation' ELSE 'warning' END AS severity,
       j.name AS subject,
       CASE WHEN j.claimed_under_limit > j.running_limit
            THEN 'pool ' || j.name || ' runs ' || j.actual_running || ' task(s) over its limit of '
                 || j.running_limit || '; ' || j.claimed_under_limit || ' were claimed under that limit'
            ELSE 'pool ' || j.name || ' runs ' || j.actual_running || ' task(s) over its limit of '
                 || j.running_limit || ' because the limit was lowered while they ran; it drains as they finish'
       END AS description,
       j.name AS pool,
       j.running_limit,
       j.running AS stored_running,
       j.actual_running,
       j.claimed_under_limit,
       j.limit_changed_at
  FROM judged j;

-- Every running task has a lease (token and expiry) and a worker.
CREATE VIEW invariant_running_without_lease AS
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

-- No task that is not running still holds a lease.
CREATE VIEW invariant_finished_with_lease AS
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

-- Attempts never exceed max_attempts.
CREATE VIEW invariant_attempts_exceeded AS
SELECT 'attempts_exceeded'::text AS check_name,
       'violation'::text AS severity,
       'task ' || t.id AS subject,
       'task ' || t.id || ' has ' || t.attempts || ' attempts, over its max_attempts of '
           || t.max_attempts AS description,
       t.id AS task_id,
       t.state,
       t.attempts,
       t.max_attempts
  FROM tasks t
 WHERE t.attempts > t.max_attempts;

-- Every claim promotes the due scheduled tasks, so a task overdue by more than
-- 5 seconds means nobody claimed since it fell due (a warning: are workers
-- running?), or, if some task was claimed 5 seconds or more after it fell due,
-- that the promotion failed (a violation).
CREATE VIEW invariant_overdue_scheduled AS
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

-- Everything at once, for operators and monitoring.
CREATE VIEW invariant_violations AS
SELECT check_name, severity, subject, description FROM invariant_pool_counts
UNION ALL
SELECT check_name, severity, subject, description FROM invariant_pool_over_limit
UNION ALL
SELECT check_name, severity, subject, description FROM invariant_running_without_lease
UNION ALL
SELECT check_name, severity, subject, description FROM invariant_finished_with_lease
UNION ALL
SELECT check_name, severity, subject, description FROM invariant_attempts_exceeded
UNION ALL
SELECT check_name, severity, subject, description FROM invariant_overdue_scheduled;
