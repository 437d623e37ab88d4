CREATE TRIGGER unpark_on_free_slot
    AFTER UPDATE ON pools
    FOR EACH ROW
    WHEN (OLD.running_limit IS NOT NULL AND OLD.running >= OLD.running_limit
          AND (NEW.running_limit IS NULL OR NEW.running < NEW.running_limit OR NEW.name <> OLD.name))
    EXECUTE FUNCTION unpark_tasks();

CREATE TRIGGER unpark_on_delete
    AFTER DELETE ON pools
    FOR EACH ROW
    WHEN (OLD.running_limit IS NOT NULL AND OLD.running >= OLD.running_limit)
    EXECUTE FUNCTION unpark_tasks();
