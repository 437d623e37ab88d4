-- pool_room_changed: the one BEFORE UPDATE trigger on pools (version 1,
-- migration 0061), in place of mark_freed_on_free_slot (mark_pool_freed) and
-- reopen_on_free_slot (reopen_pool), whose bodies it runs in that order.
--
-- Why one: PostgreSQL 15 reads a trigger's WHEN condition from its stored
-- text and prepares it again in every statement that updates the table, met
-- or not. Every claim of a pooled task takes its slot with an UPDATE of pools
-- and every completion gives it back with another. Under callgrind, one such
-- UPDATE cost 245,000 server instructions with the two triggers, 96,000 with
-- this one and 65,000 with none: the two conditions were about 6% of a pooled
-- claim + done, and on a claim, which never frees a slot, they learnt
-- nothing. This trigger's condition is what both shared (the pool has a
-- limit and was full, or kept tasks parked while it had room); the rest of
-- each is tested in the function, which only such a pool's updates call.
CREATE OR REPLACE FUNCTION pool_room_changed() RETURNS trigger
LANGUAGE plpgsql
SET search_path FROM CURRENT
AS $fn$
DECLARE
    v_old_room integer := GREATEST(OLD.running_limit - OLD.running, 0);
    v_new_room integer := NEW.running_limit - NEW.running;
BEGIN
    -- A full pool with room again (or no limit): when, so a claim that
    -- passes its tasks within the second does not park them (park_rows).
    IF OLD.running >= OLD.running_limit AND (NEW.running_limit IS NULL OR NEW.running < NEW.running_limit) THEN
        NEW.freed_at := now();
    END IF;
    -- More room than before: unpark what a claim could need (unpark_behind),
    -- every parked task when the limit is gone or the pool renamed.
    IF NEW.running_limit IS NULL OR NEW.name <> OLD.name THEN
        PERFORM unpark_behind(OLD.name, NULL);
        NEW.parked_open := false;
    ELSIF v_new_room > v_old_room THEN
        NEW.parked_open := unpark_behind(OLD.name, v_new_room - v_old_room);
    END IF;
    RETURN NEW;
END
$fn$;

DROP TRIGGER IF EXISTS mark_freed_on_free_slot ON pools;
DROP TRIGGER IF EXISTS reopen_on_free_slot ON pools;
DROP FUNCTION IF EXISTS mark_pool_freed();
DROP FUNCTION IF EXISTS reopen_pool();

CREATE TRIGGER on_pool_room
    BEFORE UPDATE ON pools
    FOR EACH ROW
    WHEN (OLD.running_limit IS NOT NULL AND (OLD.running >= OLD.running_limit OR OLD.parked_open))
    EXECUTE FUNCTION pool_room_changed();
