-- A pool's stored running count must equal the number of its running tasks.
-- The full join also catches running tasks whose pool row is missing.
CREATE OR REPLACE VIEW invariant_pool_counts AS
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
