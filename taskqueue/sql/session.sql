-- Session settings the connection layer (taskqueue/db.py) applies to a caller's connection.
-- Tables are unqualified: each connection's search_path is the queue schema.
-- Every value is a bound parameter; no name is ever pasted into SQL.

-- name: set_search_path
-- Every pooled connection of the queue's own once when it is made, and the
-- migration's connection (taskqueue/schema.py): the
-- queue's schema first, for the life of the session.
SELECT set_config('search_path', :path, false) AS path;

-- name: set_local_search_path
-- Used on a caller's connection (transactional enqueue): lasts until the end
-- of the caller's transaction unless restored.
SELECT set_config('search_path', :path, true) AS previous;

-- name: show_search_path
SELECT current_setting('search_path') AS path;

-- name: set_read_only
-- The rest of this transaction may not write (peek proves it writes nothing).
SET TRANSACTION READ ONLY;
