-- The triggers that keep parked tasks claimable when their pool has room
-- (version 1 was unpark_triggers.v1: every release unparked the whole backlog).
DROP TRIGGER IF EXISTS unpark_on_free_slot ON pools;
DROP TRIGGER IF EXISTS unpark_on_delete ON pools;

CREATE TRIGGER reopen_on_free_slot
    BEFORE UPDATE ON pools
    FOR EACH ROW
    WHEN (OLD.running_limit IS NOT NULL AND (OLD.running >= OLD.running_limit OR OLD.parked_open)
          AND (NEW.running_limit IS NULL OR NEW.name <> OLD.name
               OR (NEW.running < NEW.running_limit
                   AND NEW.running_limit - NEW.running > GREATEST(OLD.running_limit - OLD.running, 0))))
    EXECUTE FUNCTION reopen_pool();

CREATE TRIGGER unpark_on_delete
    AFTER DELETE ON pools
    FOR EACH ROW
    WHEN (OLD.running_limit IS NOT NULL AND (OLD.running >= OLD.running_limit OR OLD.parked_open))
    EXECUTE FUNCTION unpark_tasks();
