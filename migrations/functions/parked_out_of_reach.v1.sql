-- parked_out_of_reach: the parked tasks of pools with room and parked_open
-- that have fewer unparked, queued tasks of their pool and queue ahead of
-- them, needing no more than they do, than the pool has free slots, in
-- either claim order (see unpark_behind). invariant_parked_in_open_pool
-- reports them.
--
-- One walk per claim order over those pools' queued tasks, keeping per
-- pool and queue the `room` smallest sizes of the unparked tasks seen so
-- far: a parked task is out of reach when fewer than `room` of them need
-- no more than it does. A correlated count per parked task instead read
-- every unparked task of its queue again (251 s for 20,000 parked tasks
-- behind 200,000 others).
CREATE OR REPLACE FUNCTION parked_out_of_reach() RETURNS SETOF bigint
LANGUAGE plpgsql STABLE
SET search_path FROM CURRENT
AS $fn$
DECLARE
    r record;
    v_pool text;
    v_queue text;
    v_least bigint[];
    v_out bigint[] := '{}';
BEGIN
    FOR v_desc IN 0 .. 1 LOOP
        v_pool := NULL;
        FOR r IN
            SELECT t.pool, t.queue, t.id, t.required, t.parked, p.running_limit - p.running AS room
              FROM tasks t JOIN pools p ON p.name = t.pool
             WHERE p.parked_open AND p.running_limit IS NOT NULL AND p.running < p.running_limit
               AND t.state = 'queued'
             ORDER BY t.pool, t.queue, CASE WHEN v_desc = 0 THEN t.priority END,
                      CASE WHEN v_desc = 1 THEN t.priority END DESC, t.id
        LOOP
            IF r.pool IS DISTINCT FROM v_pool OR r.queue IS DISTINCT FROM v_queue THEN
                v_pool := r.pool;
                v_queue := r.queue;
                v_least := '{}';
            END IF;
            IF r.parked THEN
                IF cardinality(v_least) < r.room OR v_least[r.room] > r.required THEN
                    v_out := v_out || r.id;
                END IF;
            ELSIF cardinality(v_least) < r.room OR v_least[r.room] > r.required THEN
                v_least := (SELECT array_agg(x ORDER BY x)
                              FROM (SELECT x FROM unnest(v_least || r.required) x ORDER BY x LIMIT r.room) k);
            END IF;
        END LOOP;
    END LOOP;
    RETURN QUERY SELECT DISTINCT unnest(v_out);
END
$fn$;
