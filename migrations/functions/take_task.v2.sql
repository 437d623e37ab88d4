-- take_task: try to take one candidate of a claim.
--
-- Version 2 (migration 0026): the row is tested with state = 'queued'
-- COLLATE "C", so the planner cannot use a claim index (whose predicate says
-- state = 'queued') for a lookup by id; see claim_tasks.v19.
--
-- A claim finds candidates without locking them (a probe that locked one row
-- per bucket would hold all those locks until commit), then takes the best:
-- the row with FOR UPDATE SKIP LOCKED (re-checked under the lock, so a row
-- claimed meanwhile is passed over), then its pool slot (take_pool_slot).
-- A pool with no room joins full_pools, so the claim passes over its other
-- rows without asking again. With p_peek nothing is locked or written: the
-- pool's room is only read.
CREATE OR REPLACE FUNCTION take_task(
    p_id bigint,
    p_pool text,
    p_peek boolean,
    INOUT locked text[],
    INOUT full_pools text[],
    OUT got boolean
)
LANGUAGE plpgsql
SET search_path FROM CURRENT
AS $fn$
BEGIN
    IF NOT p_peek THEN
        PERFORM 1 FROM tasks t WHERE t.id = p_id AND t.state = 'queued' COLLATE "C" AND NOT t.parked FOR UPDATE SKIP LOCKED;
        IF NOT FOUND THEN
            got := false;
            RETURN;
        END IF;
    END IF;
    IF p_pool IS NULL THEN
        got := true;
    ELSIF p_peek THEN
        got := NOT EXISTS (SELECT 1 FROM pools p
                            WHERE p.name = p_pool AND p.running_limit IS NOT NULL AND p.running >= p.running_limit);
    ELSE
        SELECT s.got, s.locked INTO got, locked FROM take_pool_slot(p_pool, locked) s;
    END IF;
    IF NOT got THEN
        full_pools := full_pools || p_pool;
    END IF;
END
$fn$;
