-- count_few_fits: are every queue's fits for this amount few? Said in the
-- session's hints, for claim_tasks' step F (migration 0054; version 2,
-- migration 0056).
--
-- Counts the queued, unparked tasks with required <= p_remaining, index only,
-- in one range of ix_tasks_fit_any_exact (required, priority, id), up to the
-- session's budget + 1 rows. Within it, the fits are few: the setting
-- taskqueue.fit_scan becomes 'few:R', as few_fits sets it after a read of
-- every fit, so the session's next claims of at most R take step F
-- (few_fits reads them whole, within taskqueue.fit_budget, set to at least
-- c_fdry rows).
-- Past it, the next budget is four times as large, up to c_fdry, and past
-- c_fdry itself the next c_fdskips calls count nothing. The budget and the calls left to
-- skip are the setting taskqueue.fit_probe, 'budget:skips'; the first
-- budget in a session is c_fprobe rows, so a session's first claim pays
-- little for it, and a session whose fits are a few hundred finds them few
-- by its second claim (with 31 skips at each budget, 32 claims walked
-- first: over 1,000 queues at 1M tasks, 500 fits, the claim's p99 was one
-- of them, 39.6 ms). Where the fits are many it costs about
-- c_fdry / c_fdskips rows a call, and a call that only counts down (about
-- 7 us).
--
-- Version 2 (migration 0056): no call is skipped below c_fdry, where
-- version 1 skipped the next budget / 64 (2 after 128 rows, 8 after 512).
-- A skipped call's claim walks the shared order to its fit, as the naive
-- query does: over 1,000 queues with 500 fits at 1,000,000 tasks, each of
-- 8 consumer sessions walked its first 3 or 4 claims (a session's 500 / 8
-- fits leave little to spread that over), and 8 consumers ran slower than
-- one. Now a session walks once: its first count (128 rows) runs past, and
-- its second claim counts within 512.
--
-- Why: over 1,000 queues with 0.05% of the tasks fitting at the far end of
-- the claim order (the wide random draw's w16), the walk along the shared
-- order reached each fit before any claim asked fit_candidate, whose read is
-- the other way the hint is set, so no read said the fits were few and every
-- claim walked (60 ms at 200,000 tasks).
--
-- Returns true (few), false (many), or NULL (skipped). A hint skips a
-- statement, never a row: step F reads every fit again and falls back to the
-- general way when they are more than its budget, so a count gone stale
-- cannot change what is claimed.
CREATE OR REPLACE FUNCTION count_few_fits(p_remaining bigint) RETURNS boolean
LANGUAGE plpgsql
SET search_path FROM CURRENT
SET plan_cache_mode = force_generic_plan
SET enable_seqscan = off
SET jit = off
AS $fn$
DECLARE
    c_fprobe CONSTANT bigint := 128;   -- the first budget in a session
    c_fdry CONSTANT bigint := 1024;    -- the largest
    c_fdskips CONSTANT integer := 255; -- calls a count past the largest budget skips
    v_probe text := COALESCE(current_setting('taskqueue.fit_probe', true), '');
    v_hint text := COALESCE(current_setting('taskqueue.fit_scan', true), '');
    v_budget bigint := c_fprobe;
    v_skips integer := 0;
    v_n bigint;
BEGIN
    IF v_probe ~ '^[0-9]{1,6}:[0-9]{1,3}$' THEN  -- anything else (set by hand, say) starts over
        v_budget := least(greatest(split_part(v_probe, ':', 1)::bigint, c_fprobe), c_fdry);
        v_skips := split_part(v_probe, ':', 2)::integer;
    END IF;
    IF v_skips > 0 THEN
        PERFORM set_config('taskqueue.fit_probe', v_budget::text || ':' || (v_skips - 1)::text, false);
        RETURN NULL;
    END IF;
    SELECT count(*) INTO v_n
      FROM (SELECT 1 FROM tasks t
             WHERE t.state = 'queued' AND NOT t.parked AND t.id > 0 AND t.required <= p_remaining
             ORDER BY t.required, t.priority, t.id LIMIT v_budget + 1) f;
    IF v_n > v_budget THEN
        PERFORM set_config('taskqueue.fit_probe', least(4 * v_budget, c_fdry)::text || ':'
                           || (CASE WHEN v_budget >= c_fdry THEN c_fdskips ELSE 0 END)::text, false);
        RETURN false;
    END IF;
    -- A hint already few for at least this amount stays as it is. Step F's
    -- budget is at least c_fdry: a read costs the fits there are, and a
    -- budget no larger than this count's would send step F the general way
    -- (and skip few_fits' reads for a while) as soon as a few more fits came.
    IF NOT (v_hint ~ '^few:[0-9]{1,19}$' AND split_part(v_hint, ':', 2)::numeric >= p_remaining) THEN
        PERFORM set_config('taskqueue.fit_scan', 'few:' || p_remaining::text, false);
        PERFORM set_config('taskqueue.fit_budget', greatest(c_fdry, CASE
            WHEN COALESCE(current_setting('taskqueue.fit_budget', true), '') ~ '^[0-9]{1,18}$'
            THEN current_setting('taskqueue.fit_budget')::bigint END)::text, false);
    END IF;
    RETURN true;
END
$fn$;
