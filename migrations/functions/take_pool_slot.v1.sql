-- take_pool_slot: one running slot of a pool, if it has room.
--
-- p_locked lists the pool rows this transaction already holds. With none
-- held (or this one among them) the row may be waited for; otherwise a busy
-- row counts as full (SKIP LOCKED), so a claim never waits while holding a
-- pool lock. A waited-for row stays locked even when it turns out full
-- (READ COMMITTED re-check), so it joins the held list either way. Pool rows
-- normally exist from enqueue (ensure_pools); one deleted meanwhile is
-- created with this slot taken.
CREATE OR REPLACE FUNCTION take_pool_slot(p_pool text, INOUT locked text[], OUT got boolean)
LANGUAGE plpgsql
SET search_path FROM CURRENT
AS $fn$
DECLARE
    v_may_wait boolean := cardinality(locked) = 0 OR p_pool = ANY (locked);
BEGIN
    IF v_may_wait THEN
        UPDATE pools SET running = running + 1
         WHERE name = p_pool AND (running_limit IS NULL OR running < running_limit);
    ELSE
        UPDATE pools SET running = running + 1
         WHERE name = (SELECT p.name FROM pools p
                        WHERE p.name = p_pool
                          AND (p.running_limit IS NULL OR p.running < p.running_limit)
                        FOR UPDATE SKIP LOCKED);
    END IF;
    got := FOUND;
    IF NOT got AND NOT EXISTS (SELECT 1 FROM pools p WHERE p.name = p_pool) THEN
        INSERT INTO pools (name, running) VALUES (p_pool, 1) ON CONFLICT (name) DO NOTHING;
        got := FOUND;
    END IF;
    IF (v_may_wait OR got) AND NOT p_pool = ANY (locked) THEN
        locked := locked || p_pool;
    END IF;
END
$fn$;
