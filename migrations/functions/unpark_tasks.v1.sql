-- unpark_tasks: a pool that was full has room again (or is gone): its parked
-- tasks are claimable again, in the same transaction as the release.
CREATE OR REPLACE FUNCTION unpark_tasks() RETURNS trigger
LANGUAGE plpgsql
SET search_path FROM CURRENT
AS $fn$
BEGIN
    UPDATE tasks SET parked = false WHERE pool = OLD.name AND parked AND state = 'queued';
    RETURN NULL;
END
$fn$;
