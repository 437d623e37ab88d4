CREATE OR REPLACE VIEW invariant_violations AS
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
SELECT check_name, severity, subject, description FROM invariant_overdue_scheduled
UNION ALL
SELECT check_name, severity, subject, description FROM invariant_parked_in_open_pool
UNION ALL
SELECT check_name, severity, subject, description FROM invariant_parked_not_queued;
