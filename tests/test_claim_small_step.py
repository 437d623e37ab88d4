"""A single claim of less than 16 reads its candidates and takes one in two statements (claim_tasks v26 to v28).

Below 16 every bucket holds one size, so the first fitting rows in claim order
are among the first few of each bucket that fits. Step S reads those, merges
them, and locks and starts the first that no one holds. It must take exactly
what the plain rule takes (tests/test_claim_exact.py's reference) over every
queue and over one named queue, with ties of priority, rows locked elsewhere
and pools open and full; and it must leave to the general way what it cannot
settle (the first candidate's pool full under its lock, every candidate
locked). A pooled candidate's slot is taken with it (version 27).
Descending (version 27), each bucket is read backward, so a bucket's lowest
priority read may be cut short: only the rows above the highest cut are
candidates; with none (the best priority fills a bucket) that priority is
read forward, each bucket's oldest rows of it (version 28). The random
claims below are in both orders.
"""

from __future__ import annotations

import random
from typing import Any

import psycopg
import pytest

from taskqueue import TaskQueue
from tests.test_claim_exact import reference, snapshot
from tests.test_claim_plan import _calls_in_transaction

QUEUES = ("a", "b", "c")


def skip_step_s(conn: psycopg.Connection) -> None:
    """Commit the session's hint that sends its next small claims the general way (the tests of that way)."""
    conn.execute("SELECT set_config('taskqueue.small_skip', '99', false)")
    conn.commit()


def small_tasks(rng: random.Random, n: int, pools: bool) -> list[dict[str, Any]]:
    """Sizes 0..30 (half below 16), few priorities (ties) or many, some pooled."""
    wide = rng.random() < 0.5
    return [{
        "payload": {},
        "queue": rng.choice(QUEUES),
        "priority": rng.randint(0, 10**5) if wide else rng.randint(0, 3),
        "required": rng.randint(0, 30),
        "pool": rng.choice((None, None, None, "p0", "p1")) if pools else None,
    } for _ in range(n)]


@pytest.mark.parametrize("seed", range(4))
def test_single_small_claims_match_the_reference(tq: TaskQueue, dsn: str, seed: int) -> None:
    """Each claim: a random amount below 16, order, queue (every queue or one),
    some of the first 12 fits locked elsewhere (8 and more: every candidate)."""
    rng = random.Random(4200 + seed)
    pools = seed % 2 == 1
    tq.enqueue_many(small_tasks(rng, 600, pools))
    if pools:
        tq.set_pool_limit("p0", 0)
        tq.set_pool_limit("p1", 3)
    held = []
    for step in range(40):
        rows, limits = snapshot(dsn)
        available, order = rng.randint(0, 15), rng.choice(("min", "max"))
        queues = rng.choice((None, None, [rng.choice(QUEUES)]))
        sign = 1 if order == "min" else -1
        fits = sorted((r for r in rows if r.required <= available and (queues is None or r.queue in queues)),
                      key=lambda r: (sign * r.priority, r.id))
        lock_all = rng.random() < 0.15
        locked = {r.id for r in fits[:12] if lock_all or rng.random() < 0.3}
        expected = reference(rows, limits, available, 1, queues, order, locked)
        with psycopg.connect(dsn) as other:
            other.execute("SELECT id FROM taskqueue.tasks WHERE id = ANY (%s) FOR UPDATE", (list(locked),))
            got = tq.claim(available=available, queues=queues, order=order)  # type: ignore[arg-type]
        assert ([got.id] if got is not None else []) == expected, (
            f"step {step}: available={available} {order} queues={queues} locked={len(locked)}")
        if got is not None:
            held.append(got)
        rng.shuffle(held)
        while held and rng.random() < 0.5:
            tq.complete(held.pop())
    assert tq.check().ok


def _seed(conn: psycopg.Connection, sql: str, params: tuple[Any, ...]) -> None:
    conn.execute("SELECT set_config('search_path', 'taskqueue', false)")
    conn.execute(sql, params)
    conn.execute("ANALYZE tasks")
    conn.commit()


DEADLINES = ("INSERT INTO tasks (queue, payload, priority, required, pool, state, max_attempts) "
             "SELECT 'default', '{}'::jsonb, g, CASE WHEN g > %s THEN 1 + g %% 4 ELSE 5 + (g * 7919) %% 60 END, "
             "%s, 'queued', 3 FROM generate_series(1, %s) g")


DEADLINES_MAX = ("INSERT INTO tasks (queue, payload, priority, required, pool, state, max_attempts) "
                 "SELECT 'default', '{}'::jsonb, g, CASE WHEN g <= %s THEN 1 + g %% 4 ELSE 5 + (g * 7919) %% 60 END, "
                 "%s, 'queued', 3 FROM generate_series(1, %s) g")


@pytest.mark.parametrize("queues", ["NULL", "ARRAY['default']"])
@pytest.mark.parametrize("order", ["min", "max"])
def test_a_small_claim_is_settled_by_the_claim_alone(dsn: str, queues: str, order: str) -> None:
    """Every task its own priority, the ones that fit 4 at the far end of the
    walk (order=max: at the lowest priorities): the claim takes the best fit
    with no other function called (version 25 asked fit_candidate; descending,
    version 26), even with the first three fits locked elsewhere, over every
    queue and over one named queue, and leaves no hint."""
    desc = order == "max"
    with psycopg.connect(dsn) as conn, psycopg.connect(dsn) as other:
        _seed(conn, DEADLINES_MAX if desc else DEADLINES, (100 if desc else 4900, None, 5000))
        order_by = "priority DESC, id" if desc else "priority, id"
        fits = [int(r[0]) for r in conn.execute(
            f"SELECT id FROM tasks WHERE required <= 4 ORDER BY {order_by} LIMIT 4").fetchall()]
        other.execute("SELECT set_config('search_path', 'taskqueue', false)")
        other.execute("SELECT id FROM tasks WHERE id = ANY (%s) FOR UPDATE", (fits[:3],))
        claim = f"SELECT id FROM claim_tasks(4, 1, {queues}, 'w', 60, {desc})"
        ids, calls = _calls_in_transaction(conn, claim)
        hint = conn.execute("SELECT current_setting('taskqueue.small_skip', true)").fetchone()
        other.rollback()
    assert ids == [fits[3]]
    assert calls == {"claim_tasks": 1}, calls
    assert hint is not None and hint[0] in (None, "")


def test_nothing_fits_and_no_other_function_is_called(dsn: str) -> None:
    with psycopg.connect(dsn) as conn:
        _seed(conn, DEADLINES, (5000, None, 5000))  # no task needs less than 5
        ids, calls = _calls_in_transaction(conn, "SELECT id FROM claim_tasks(4, 1, NULL, 'w', 60, false)")
    assert ids == []
    assert calls == {"claim_tasks": 1}, calls


def test_every_candidate_locked_goes_the_general_way(dsn: str) -> None:
    """The first 10 fits locked elsewhere: more than step S reads (8), so the
    general way takes the 11th, and no hint is left for the next claims."""
    with psycopg.connect(dsn) as conn, psycopg.connect(dsn) as other:
        _seed(conn, DEADLINES, (4900, None, 5000))
        fits = [int(r[0]) for r in conn.execute(
            "SELECT id FROM tasks WHERE required <= 4 ORDER BY priority, id LIMIT 11").fetchall()]
        other.execute("SELECT set_config('search_path', 'taskqueue', false)")
        other.execute("SELECT id FROM tasks WHERE id = ANY (%s) FOR UPDATE", (fits[:10],))
        ids, calls = _calls_in_transaction(conn, "SELECT id FROM claim_tasks(4, 1, NULL, 'w', 60, false)")
        hint = conn.execute("SELECT current_setting('taskqueue.small_skip', true)").fetchone()
        other.rollback()
    assert ids == [fits[10]]
    assert "fit_candidate" in calls, calls
    assert hint is not None and hint[0] in (None, "")


def test_a_pooled_candidate_is_taken_with_its_slot_by_the_claim_alone(dsn: str) -> None:
    """Every task in one pool with room (version 27): step S takes the best fit
    and its pool's slot in its own statements, 16 times, with no other
    function called and the pool's count exact."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        _seed(conn, DEADLINES, (4900, "p", 5000))
        conn.execute("INSERT INTO pools (name, running_limit) VALUES ('p', 1000)")
        best = [int(r[0]) for r in conn.execute(
            "SELECT id FROM tasks WHERE required <= 4 ORDER BY priority, id LIMIT 16").fetchall()]
        got = [conn.execute("SELECT id FROM claim_tasks(4, 1, NULL, 'w', 60, false)").fetchone()[0]  # type: ignore[index]
               for _ in range(15)]
        conn.execute("BEGIN")
        last, calls = _calls_in_transaction(conn, "SELECT id FROM claim_tasks(4, 1, NULL, 'w', 60, false)")
        hint = conn.execute("SELECT current_setting('taskqueue.small_skip', true)").fetchone()
        running = conn.execute("SELECT running FROM pools WHERE name = 'p'").fetchone()
    assert got == best[:15] and last == [best[15]]
    assert set(calls) == {"claim_tasks"}, calls
    assert hint is not None and hint[0] in (None, "")
    assert running == (15,)  # the 16th claim was rolled back, its slot with it


def test_a_full_pools_fit_first_is_passed_the_general_way_and_the_session_skips_step_s(dsn: str) -> None:
    """The best fits are in a full pool: step S's take finds it full under the
    pool's lock and starts nothing, the general way passes them (and parks
    them) and takes the best fit of a pool with room; the next 15 claims of
    the session skip step S (a statement in vain), counting down."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        _seed(conn, DEADLINES, (4900, "p", 5000))
        conn.execute("UPDATE tasks SET pool = 'open' WHERE id % 2 = 0")
        conn.execute("INSERT INTO pools (name, running_limit) VALUES ('p', 0), ('open', NULL)")
        best = conn.execute(
            "SELECT id FROM tasks WHERE required <= 4 AND pool = 'open' ORDER BY priority, id LIMIT 1").fetchone()
        first = conn.execute("SELECT id FROM claim_tasks(4, 1, NULL, 'w', 60, false)").fetchall()
        hints = [conn.execute("SELECT current_setting('taskqueue.small_skip', true)").fetchone()[0]]  # type: ignore[index]
        for _ in range(15):
            assert conn.execute("SELECT id FROM claim_tasks(4, 1, NULL, 'w', 60, false)").fetchall()
            hints.append(conn.execute("SELECT current_setting('taskqueue.small_skip', true)").fetchone()[0])  # type: ignore[index]
        running = conn.execute("SELECT name, running FROM pools ORDER BY name").fetchall()
    assert best is not None and first == [best]
    assert hints[0] == "15"
    assert hints[1:] == [str(n) for n in range(14, -1, -1)]
    assert running == [("open", 16), ("p", 0)]


def test_a_hint_that_is_not_a_count_is_ignored(dsn: str) -> None:
    """A hand-set value that is not a count of 1 to 99 cannot make a claim fail or skip step S."""
    with psycopg.connect(dsn) as conn:
        _seed(conn, DEADLINES, (4900, None, 5000))
        conn.execute("SELECT set_config('taskqueue.small_skip', 'x:7', false)")
        ids, calls = _calls_in_transaction(conn, "SELECT id FROM claim_tasks(4, 1, NULL, 'w', 60, false)")
        best = conn.execute("SELECT id FROM tasks WHERE required <= 4 ORDER BY priority, id LIMIT 1").fetchone()
    assert best is not None and ids == [best[0]]
    assert calls == {"claim_tasks": 1}, calls


def _insert(conn: psycopg.Connection, rows: list[tuple[int, int]]) -> list[int]:
    """(priority, required) rows in this order; their ids."""
    return [int(conn.execute(
        "INSERT INTO tasks (queue, payload, priority, required, state, max_attempts) "
        "VALUES ('default', '{}'::jsonb, %s, %s, 'queued', 3) RETURNING id", row).fetchone()[0])  # type: ignore[index]
        for row in rows]


def test_a_descending_read_cut_short_inside_a_priority_never_passes_its_oldest_row(dsn: str) -> None:
    """Bucket 1 holds priorities 100 down to 93 (8 rows, read backward) and an
    older row of 93 it does not read; bucket 2 one row of 93. Only 94..100 are
    candidates. With all seven locked elsewhere, the claim must take the
    oldest row of 93 (the first inserted), which step S never read."""
    with psycopg.connect(dsn) as conn, psycopg.connect(dsn) as other:
        conn.execute("SELECT set_config('search_path', 'taskqueue', false)")
        oldest, _ = _insert(conn, [(93, 1), (93, 2)])
        above = _insert(conn, [(p, 1) for p in range(93, 101)])[1:]
        conn.commit()
        other.execute("SELECT set_config('search_path', 'taskqueue', false)")
        other.execute("SELECT id FROM tasks WHERE id = ANY (%s) FOR UPDATE", (above,))
        ids, _ = _calls_in_transaction(conn, "SELECT id FROM claim_tasks(4, 1, NULL, 'w', 60, true)")
        other.rollback()
        conn.rollback()
    with psycopg.connect(dsn) as fresh:  # a session of its own: no call counted from the claim above
        fresh.execute("SELECT set_config('search_path', 'taskqueue', false)")
        first, calls = _calls_in_transaction(fresh, "SELECT id FROM claim_tasks(4, 1, NULL, 'w', 60, true)")
    assert ids == [oldest]
    assert first == [above[-1]]  # priority 100, with nothing locked: step S alone
    assert calls == {"claim_tasks": 1}, calls


@pytest.mark.parametrize("queues", ["NULL", "ARRAY['default']"])
def test_a_best_priority_that_fills_a_bucket_is_read_forward_by_the_claim_alone(dsn: str, queues: str) -> None:
    """Priorities 3 and 5, 20 tasks of 5 needing 1 and 2 in turn, older tasks of
    3 and a newer 1 that needs 9: both buckets' last 8 rows are all of 5, so
    nothing is above the cut. Step S reads 5 forward (version 28): the claim
    takes its oldest row with no other function called, then its next ones in
    turn leaving no hint, and with the next 7 locked elsewhere, the eighth."""
    claim = f"SELECT id FROM claim_tasks(4, 1, {queues}, 'w', 60, true)"
    with psycopg.connect(dsn) as conn, psycopg.connect(dsn) as other:
        conn.execute("SELECT set_config('search_path', 'taskqueue', false)")
        _insert(conn, [(3, 1), (3, 2)] * 5)
        fives = _insert(conn, [(5, 1 + i % 2) for i in range(20)])
        _insert(conn, [(1, 9)])
        conn.commit()
        first, calls = _calls_in_transaction(conn, claim)
        got, hints = [], []
        for _ in range(3):
            got += [r[0] for r in conn.execute(claim).fetchall()]
            conn.commit()
            hints.append(conn.execute("SELECT current_setting('taskqueue.small_skip', true)").fetchone()[0])  # type: ignore[index]
        other.execute("SELECT set_config('search_path', 'taskqueue', false)")
        other.execute("SELECT id FROM tasks WHERE id = ANY (%s) FOR UPDATE", (fives[3:10],))
        with psycopg.connect(dsn) as fresh:  # a session of its own: no call counted from the claims above
            eighth, locked_calls = _calls_in_transaction(fresh, claim.replace("claim_tasks(", "taskqueue.claim_tasks("))
        other.rollback()
    assert first == [fives[0]]
    assert calls == {"claim_tasks": 1}, calls
    assert got == fives[:3]
    assert all(h in (None, "") for h in hints), hints
    assert eighth == [fives[10]]
    assert locked_calls == {"claim_tasks": 1}, locked_calls


def test_a_best_priority_whose_first_rows_are_all_locked_goes_the_general_way(dsn: str) -> None:
    """The forward read's 8 candidates of the best priority all locked
    elsewhere: the general way takes the ninth, which step S did not read."""
    with psycopg.connect(dsn, autocommit=True) as conn, psycopg.connect(dsn) as other:
        conn.execute("SELECT set_config('search_path', 'taskqueue', false)")
        fives = _insert(conn, [(5, 1)] * 12)
        other.execute("SELECT set_config('search_path', 'taskqueue', false)")
        other.execute("SELECT id FROM tasks WHERE id = ANY (%s) FOR UPDATE", (fives[:8],))
        got = [r[0] for r in conn.execute("SELECT id FROM claim_tasks(4, 1, NULL, 'w', 60, true)").fetchall()]
        other.rollback()
    assert got == [fives[8]]
