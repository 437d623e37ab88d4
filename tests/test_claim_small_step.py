"""A single ascending claim of less than 16 reads its candidates and takes one in two statements (claim_tasks v26).

Below 16 every bucket holds one size, so the first fitting rows in claim order
are among the first few of each bucket that fits. Step S reads those, merges
them, and locks and starts the first that no one holds. It must take exactly
what the plain rule takes (tests/test_claim_exact.py's reference) over every
queue and over one named queue, with ties of priority, rows locked elsewhere
and pools open and full; and it must leave to the general way what it cannot
settle (a pooled candidate first, every candidate locked).
The random claims below are in both orders: descending ones go the general way.
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


@pytest.mark.parametrize("queues", ["NULL", "ARRAY['default']"])
def test_a_small_claim_is_settled_by_the_claim_alone(dsn: str, queues: str) -> None:
    """Every task its own priority, the ones that fit 4 at the far end of the
    walk: the claim takes the best fit with no other function called
    (version 25 asked fit_candidate), even with the first three fits locked
    elsewhere, over every queue and over one named queue."""
    with psycopg.connect(dsn) as conn, psycopg.connect(dsn) as other:
        _seed(conn, DEADLINES, (4900, None, 5000))
        fits = [int(r[0]) for r in conn.execute(
            "SELECT id FROM tasks WHERE required <= 4 ORDER BY priority, id LIMIT 4").fetchall()]
        other.execute("SELECT set_config('search_path', 'taskqueue', false)")
        other.execute("SELECT id FROM tasks WHERE id = ANY (%s) FOR UPDATE", (fits[:3],))
        claim = f"SELECT id FROM claim_tasks(4, 1, {queues}, 'w', 60, false)"
        ids, calls = _calls_in_transaction(conn, claim)
        other.rollback()
    assert ids == [fits[3]]
    assert calls == {"claim_tasks": 1}, calls


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


def test_a_pooled_candidate_first_is_taken_the_general_way_and_the_session_skips_step_s(dsn: str) -> None:
    """The best fit is pooled: the general way takes it with its pool's slot,
    and the next 15 claims of the session skip step S (a statement in vain),
    counting down; then step S runs again."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        _seed(conn, DEADLINES, (4900, "p", 5000))
        conn.execute("INSERT INTO pools (name, running_limit) VALUES ('p', 1000)")
        best = conn.execute("SELECT id FROM tasks WHERE required <= 4 ORDER BY priority, id LIMIT 1").fetchone()
        first = conn.execute("SELECT id FROM claim_tasks(4, 1, NULL, 'w', 60, false)").fetchall()
        hints = [conn.execute("SELECT current_setting('taskqueue.small_skip', true)").fetchone()[0]]  # type: ignore[index]
        for _ in range(15):
            assert conn.execute("SELECT id FROM claim_tasks(4, 1, NULL, 'w', 60, false)").fetchall()
            hints.append(conn.execute("SELECT current_setting('taskqueue.small_skip', true)").fetchone()[0])  # type: ignore[index]
        running = conn.execute("SELECT running FROM pools WHERE name = 'p'").fetchone()
    assert best is not None and first == [best]
    assert hints[0] == "15"
    assert hints[1:] == [str(n) for n in range(14, -1, -1)]
    assert running == (16,)


def test_a_hint_that_is_not_a_count_is_ignored(dsn: str) -> None:
    """A hand-set value that is not a count of 1 to 99 cannot make a claim fail or skip step S."""
    with psycopg.connect(dsn) as conn:
        _seed(conn, DEADLINES, (4900, None, 5000))
        conn.execute("SELECT set_config('taskqueue.small_skip', 'x:7', false)")
        ids, calls = _calls_in_transaction(conn, "SELECT id FROM claim_tasks(4, 1, NULL, 'w', 60, false)")
        best = conn.execute("SELECT id FROM tasks WHERE required <= 4 ORDER BY priority, id LIMIT 1").fetchone()
    assert best is not None and ids == [best[0]]
    assert calls == {"claim_tasks": 1}, calls
