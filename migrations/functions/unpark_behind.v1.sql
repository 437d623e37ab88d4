-- unpark_behind: put back the parked tasks of a pool with room that a claim
-- could need, and leave the rest parked behind them. Returns whether any
-- task of the pool is still parked.
--
-- A pool that frees one slot used to unpark its whole backlog, each row
-- rewritten into every claim index (about 85 µs a row: 1.7 s for 20,000 rows
-- of one slow pool, paid on every release). But one free slot is taken by
-- one claim, and a claim takes the first task in its order that fits. A
-- parked task r may stay parked while `room` unparked, queued tasks of its
-- pool and queue come before it and need no more than it does, in both
-- claim orders ((priority, id) and (priority DESC, id)): any claim that r
-- would fit finds those first, and by the time it has taken them all the
-- pool is full again. claim_many packs the same way, each task taken using
-- one slot of the room and one of r's forerunners.
--
-- p_layers is how many forerunners each remaining parked task gains. One
-- layer unparks, per queue, the tasks that need less than every parked task
-- before them in either order (the staircase of running minima, about ln n
-- tasks for sizes in random order, one task when all sizes are equal, and
-- every task when the size falls with id, as before). Every task left parked
-- then has a forerunner among them, and the next layer, peeled from what is
-- still parked, gives it another. Beyond c_max_layers, or when a layer holds
-- more than half of what is parked, the whole backlog goes back, as it
-- always did, in one pass over the pool's parked rows.
--
-- Below 1,000 parked tasks (the setting taskqueue.unpark_all_below), the
-- whole backlog goes back all the same: that costs at most about 85 ms, and
-- it keeps one more property exact. A claim skips rows that another
-- transaction holds locked (SKIP LOCKED). A concurrent claim that holds a
-- forerunner takes the slot with it, so the task behind could not have run
-- anyway. But a transaction that holds a forerunner and takes no slot (a
-- cancel in flight, an operator's SELECT ... FOR UPDATE) hides the tasks
-- parked behind it until it ends. Past the threshold that is the trade for
-- not rewriting the backlog on every release.
--
-- Invariant (invariant_parked_in_open_pool): a parked task's pool is full,
-- or it has parked_open set and the task has `room` such forerunners.
CREATE OR REPLACE FUNCTION unpark_behind(p_pool text, p_layers integer) RETURNS boolean
LANGUAGE plpgsql
SET search_path FROM CURRENT
AS $fn$
DECLARE
    c_max_layers CONSTANT integer := 16;
    v_setting text := current_setting('taskqueue.unpark_all_below', true);
    v_all_below integer := CASE WHEN v_setting ~ '^[0-9]{1,9}$' THEN v_setting::integer ELSE 1000 END;
    v_ids bigint[];
    v_parked bigint;
BEGIN
    IF p_layers IS NULL OR p_layers > c_max_layers
       OR (SELECT count(*) FROM (SELECT 1 FROM tasks
                                  WHERE pool = p_pool AND parked AND state = 'queued'
                                  LIMIT v_all_below) few) < v_all_below THEN
        UPDATE tasks SET parked = false WHERE pool = p_pool AND parked AND state = 'queued';
        RETURN false;
    END IF;
    FOR i IN 1 .. p_layers LOOP
        -- The ids first, then the update by primary key: the row estimate of
        -- ix_tasks_parked is stale as often as not (a claim parked thousands
        -- since the last ANALYZE), and a join planned for one row there ran
        -- the window once per row of the table.
        SELECT array_agg(s.id) FILTER (WHERE s.least_before IS NULL OR s.required < s.least_before
                                       OR s.least_before_desc IS NULL OR s.required < s.least_before_desc),
               count(*)
          INTO v_ids, v_parked
          FROM (SELECT t.id, t.required,
                       min(t.required) OVER (PARTITION BY t.queue ORDER BY t.priority, t.id
                                             ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS least_before,
                       min(t.required) OVER (PARTITION BY t.queue ORDER BY t.priority DESC, t.id
                                             ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS least_before_desc
                  FROM tasks t
                 WHERE t.pool = p_pool AND t.parked AND t.state = 'queued') s;
        IF cardinality(v_ids) * 2 > v_parked THEN
            -- Most of the backlog (sizes that fall as ids grow): one pass over
            -- the pool's parked rows costs less than as many lookups by id.
            UPDATE tasks SET parked = false WHERE pool = p_pool AND parked AND state = 'queued';
            RETURN false;
        END IF;
        UPDATE tasks SET parked = false WHERE id = ANY (v_ids) AND parked AND state = 'queued';
        EXIT WHEN NOT FOUND;
    END LOOP;
    RETURN EXISTS (SELECT 1 FROM tasks WHERE pool = p_pool AND parked AND state = 'queued');
END
$fn$;
