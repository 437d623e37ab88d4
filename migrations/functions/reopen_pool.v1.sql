-- reopen_pool: a pool update that gives the pool more room than it had puts
-- back, in the same row update, the parked tasks a claim could now need
-- (unpark_behind), and records in parked_open whether any stay parked.
--
-- From full, each parked task needs `room` forerunners; from open with
-- parked_open, each already has as many as the old room, so only the slots
-- added count. A claim that takes a slot needs nothing: it uses one slot
-- and at most one forerunner of each parked task. A pool that loses its
-- limit or its name has its whole backlog put back, as before.
CREATE OR REPLACE FUNCTION reopen_pool() RETURNS trigger
LANGUAGE plpgsql
SET search_path FROM CURRENT
AS $fn$
DECLARE
    v_old_room integer := GREATEST(OLD.running_limit - OLD.running, 0);
    v_new_room integer := NEW.running_limit - NEW.running;
BEGIN
    IF NEW.running_limit IS NULL OR NEW.name <> OLD.name THEN
        PERFORM unpark_behind(OLD.name, NULL);
        NEW.parked_open := false;
    ELSIF v_new_room > v_old_room THEN
        NEW.parked_open := unpark_behind(OLD.name, v_new_room - v_old_room);
    END IF;
    RETURN NEW;
END
$fn$;
