-- Advisory locks: the maintenance leader's election, and the migration lock.
-- Tables are unqualified: each connection's search_path is the queue schema.
-- Every value is a bound parameter; no name is ever pasted into SQL.

-- name: try_advisory_lock
SELECT pg_try_advisory_lock(:key) AS locked;

-- name: advisory_unlock
SELECT pg_advisory_unlock(:key) AS unlocked;

-- name: holds_advisory_lock
-- Whether this session still holds the session-level advisory lock :key (a
-- bigint key shows in pg_locks as classid = high half, objid = low half,
-- objsubid = 1). The maintenance leader asks on its own connection before each
-- round, so it never acts on a leadership that died with its session.
SELECT EXISTS (
    SELECT 1 FROM pg_locks
     WHERE locktype = 'advisory' AND pid = pg_backend_pid() AND granted AND objsubid = 1
       AND classid = CAST((CAST(:key AS bigint) >> 32) & 4294967295 AS oid)
       AND objid = CAST(CAST(:key AS bigint) & 4294967295 AS oid)
) AS held;

-- name: set_idle_session_timeout
-- The maintenance leader's session ends itself after this long idle (PG 14+),
-- so a frozen (SIGSTOPped) leader cannot keep its advisory lock forever; a
-- live leader touches its session every round, well within the timeout.
SELECT set_config('idle_session_timeout', :value, false) AS value;

-- name: advisory_xact_lock
SELECT pg_advisory_xact_lock(:key);
