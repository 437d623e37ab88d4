-- mark_pool_freed: a pool that was full and has room again records when
-- (freed_at), in the row update that frees it, whatever frees it: a
-- completion, a failure, a rescue, a raised or removed limit, a recount, an
-- operator's UPDATE. park_rows (version 4) leaves the tasks of a pool freed
-- in the last second unparked: such a pool fills and frees again and again,
-- and every time it frees, unpark_tasks puts back what the claims parked
-- meanwhile.
CREATE OR REPLACE FUNCTION mark_pool_freed() RETURNS trigger
LANGUAGE plpgsql
SET search_path FROM CURRENT
AS $fn$
BEGIN
    NEW.freed_at := now();
    RETURN NEW;
END
$fn$;

CREATE TRIGGER mark_freed_on_free_slot
    BEFORE UPDATE ON pools
    FOR EACH ROW
    WHEN (OLD.running_limit IS NOT NULL AND OLD.running >= OLD.running_limit
          AND (NEW.running_limit IS NULL OR NEW.running < NEW.running_limit))
    EXECUTE FUNCTION mark_pool_freed();
