-- Attempts never exceed max_attempts.
CREATE OR REPLACE VIEW invariant_attempts_exceeded AS
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
