-- Only the demo runs these (taskqueue/cli/demo.py), on its own schema.
-- Tables are unqualified: each connection's search_path is the queue schema.
-- Every value is a bound parameter; no name is ever pasted into SQL.

-- name: delete_all_tasks
-- The demo starts from an empty queue in its own schema (never a user's):
-- tasks and pools go together so no pool count outlives its tasks.
DELETE FROM tasks;

-- name: delete_all_pools
-- See delete_all_tasks; run in the same transaction, after it.
DELETE FROM pools;
