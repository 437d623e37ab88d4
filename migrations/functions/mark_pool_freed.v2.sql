-- mark_pool_freed: a pool that was full and has room again records when
-- (freed_at), in the row update that frees it, whatever frees it: a
-- completion, a failure, a rescue, a raised or removed limit, a recount, an
-- operator's UPDATE. park_rows (version 4) leaves the tasks of a pool freed
-- in the last second unparked: such a pool fills and frees again and again,
-- and every time it frees, unpark_tasks puts back what the claims parked
-- meanwhile.
--
-- Version 2 (migration 0045): parked_count goes back to 0 in the same row
-- update, as unpark_tasks puts every parked task of the pool back in the
-- same statement. park_rows (version 6) parks a pool that had room before
-- only as far as its count allows.
-- The trigger (mark_freed_on_free_slot, migration 0034) is unchanged.
CREATE OR REPLACE FUNCTION mark_pool_freed() RETURNS trigger
LANGUAGE plpgsql
SET search_path FROM CURRENT
AS $fn$
BEGIN
    NEW.freed_at := now();
    NEW.parked_count := 0;
    RETURN NEW;
END
$fn$;
