-- No pool runs more tasks than its limit. Lowering a limit never stops running
-- tasks, so a pool may stay over a lowered limit until they finish: that is a
-- warning. It is a violation when the tasks claimed since the limit was last
-- set (started_at >= limit_changed_at) alone exceed it, because every one of
-- those claims saw the new limit.
CREATE OR REPLACE VIEW invariant_pool_over_limit AS
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
