"""Step L: a small claim over a list of queues whose look ran dry takes one of several fits (claim_tasks v31).

Below 16 every bucket holds one size, so the first fits in claim order are
among the first rows of the buckets that fit. While the session's hint says
the look along the shared order ran dry for the list, step L reads the first
16 rows of each such bucket over every queue (ix_tasks_fit_small_any; since
migration 0053, ix_tasks_fit_any_exact), keeps
the listed queues' rows up to the cut (the smallest last key of a bucket read
to its budget: past it a bucket may hold listed rows it did not read), and
takes the first of them that no one holds, in one statement more. v30 asked
fit_candidate, a probe per listed queue and bucket, for the one first fit, so
concurrent claims were all sent to the same row. The claims must still take
exactly what the plain rule takes (tests/test_claim_exact.py's reference),
with rows locked elsewhere and pools open and full.
"""

from __future__ import annotations

import random

import psycopg
import pytest

from tests.test_claim_exact import reference, snapshot
from tests.test_claim_list_hint import _hint, _small_skip
from tests.test_claim_plan import _calls_in_transaction

pytestmark = pytest.mark.slow

QUEUES = ("a", "b", "c", "d")
CLAIM = "SELECT id FROM claim_tasks(%s, 1, %s, 'w', 60, false)"


def _dry_hint(conn: psycopg.Connection, amount: int, queues: list[str], skips: int = 0) -> None:
    """The hint a dry look over ``queues`` at ``amount`` leaves in the session (what step L waits for)."""
    conn.execute("SELECT set_config('taskqueue.dry_look', %s || ':' || %s || ':md5:' || md5(%s::text[]::text), false)",
                 (str(amount), str(skips), queues))


def _fits(conn: psycopg.Connection, available: int, queues: list[str], n: int) -> list[int]:
    return [int(r[0]) for r in conn.execute(
        "SELECT id FROM taskqueue.tasks WHERE state = 'queued' AND required <= %s AND queue = ANY (%s) "
        "ORDER BY priority, id LIMIT %s", (available, queues, n)).fetchall()]


def _connect(dsn: str, autocommit: bool = False) -> psycopg.Connection:
    conn = psycopg.connect(dsn, autocommit=autocommit)
    conn.execute("SELECT set_config('search_path', 'taskqueue', false)")
    if not autocommit:
        conn.commit()
    return conn


def _seed_deadlines(dsn: str) -> None:
    """listed_deadlines in small: every task its own priority, the 1% needing 1..4 at the worst ones, 8 queues."""
    with _connect(dsn, autocommit=True) as conn:
        conn.execute(
            "INSERT INTO tasks (queue, payload, priority, required, state, max_attempts) "
            "SELECT 'q' || (g * 17) % 8, '{}'::jsonb, g, CASE WHEN g > 9700 THEN 1 + g % 4 ELSE 5 + (g * 7919) % 60 END, "
            "'queued', 3 FROM generate_series(1, 10000) g")
        conn.execute("VACUUM ANALYZE tasks")


LISTED = ["q0", "q1", "q2", "q3"]


def test_concurrent_small_listed_claims_each_take_the_next_fit_with_no_bucket_call(dsn: str) -> None:
    """Six sessions, each with the dry-look hint, claim in turn and hold
    their claims open: each takes the next fit in claim order, the claim
    alone (v30 asked fit_candidate, which named the first fit to every one
    of them, then walked on after it), and counts the hint."""
    _seed_deadlines(dsn)
    sessions = [_connect(dsn) for _ in range(6)]
    try:
        fits = _fits(sessions[0], 4, LISTED, 6)
        sessions[0].commit()
        for n, conn in enumerate(sessions):
            _dry_hint(conn, 4, LISTED)
            conn.commit()
            if n < len(sessions) - 1:
                ids = [int(r[0]) for r in conn.execute(CLAIM, (4, LISTED)).fetchall()]
                assert _hint(conn).startswith("4:1:md5:"), _hint(conn)
            else:
                ids, calls = _calls_in_transaction(conn, CLAIM % ("4", "ARRAY['q0','q1','q2','q3']"))
                assert calls == {"claim_tasks": 1}, calls
            assert ids == [fits[n]], (n, ids, fits)
    finally:
        for conn in sessions:
            conn.rollback()
            conn.close()


def test_rows_past_the_cut_are_not_taken_before_rows_no_bucket_read(dsn: str) -> None:
    """Bucket 1 holds 16 tasks of queue x (not listed) at priorities 0..15,
    then queue b's at 16 and 17; bucket 2 holds queue c's at 3 and 30. Step
    L reads bucket 1 to its budget (x's 16 rows), so the cut is x's priority
    15, and c's 30 is no candidate. With c's 3 locked elsewhere, the claim
    must take b's 16, which step L did not read (without the cut it would
    take c's 30)."""
    with _connect(dsn, autocommit=True) as conn:
        conn.execute("INSERT INTO tasks (queue, payload, priority, required, state, max_attempts) "
                     "SELECT 'x', '{}'::jsonb, g, 1, 'queued', 3 FROM generate_series(0, 15) g")
        conn.execute("INSERT INTO tasks (queue, payload, priority, required, state, max_attempts) "
                     "VALUES ('b', '{}', 16, 1, 'queued', 3), ('b', '{}', 17, 1, 'queued', 3), "
                     "('c', '{}', 3, 2, 'queued', 3), ('c', '{}', 30, 2, 'queued', 3)")
        conn.execute("ANALYZE tasks")
        fits = _fits(conn, 4, ["b", "c"], 3)
        c30 = int(conn.execute("SELECT id FROM tasks WHERE queue = 'c' AND priority = 30").fetchone()[0])  # type: ignore[index]
    with _connect(dsn) as other, _connect(dsn) as conn:
        other.execute("SELECT id FROM tasks WHERE id = %s FOR UPDATE", (fits[0],))
        _dry_hint(conn, 4, ["b", "c"])
        conn.commit()
        got = [int(r[0]) for r in conn.execute(CLAIM, (4, ["b", "c"])).fetchall()]
        conn.rollback()
        other.rollback()
    assert got == [fits[1]] and c30 not in got


def test_a_list_whose_fits_lie_past_the_cut_goes_the_general_way_and_skips_step_l(dsn: str) -> None:
    """Every bucket that fits is full of another queue's tasks ahead of the
    list's (a list of few of the queues with small tasks): nothing listed is
    before the cut, so the claim goes the general way, still exact, and the
    session skips step L for its next 99 small claims."""
    with _connect(dsn, autocommit=True) as conn:
        conn.execute("INSERT INTO tasks (queue, payload, priority, required, state, max_attempts) "
                     "SELECT 'x', '{}'::jsonb, g, 1 + g % 4, 'queued', 3 FROM generate_series(0, 199) g")
        conn.execute("INSERT INTO tasks (queue, payload, priority, required, state, max_attempts) "
                     "SELECT (ARRAY['b','c'])[1 + g % 2], '{}'::jsonb, 1000 + g, 1 + g % 4, 'queued', 3 "
                     "FROM generate_series(0, 99) g")
        conn.execute("ANALYZE tasks")
        expected = _fits(conn, 4, ["b", "c"], 1)
        _dry_hint(conn, 4, ["b", "c"])
        assert [int(r[0]) for r in conn.execute(CLAIM, (4, ["b", "c"])).fetchall()] == expected
        assert _small_skip(conn) == "99"


def test_a_full_pools_first_fit_is_passed_and_parked_the_general_way(dsn: str) -> None:
    """The first fit is in a pool of limit 0: step L's take starts nothing,
    the general way passes it (and parks it) and takes the next fit, whose
    pool gives its slot; the session skips step L for its next small claims,
    as step S does. A new session's step L then takes the third fit alone
    (the parked task has left the buckets)."""
    with _connect(dsn, autocommit=True) as conn:
        conn.execute("INSERT INTO pools (name, running_limit) VALUES ('full', 0), ('open', 5)")
        conn.execute("INSERT INTO tasks (queue, payload, priority, required, pool, state, max_attempts) "
                     "VALUES ('b', '{}', 1, 2, 'full', 'queued', 3), ('c', '{}', 2, 3, 'open', 'queued', 3), "
                     "('b', '{}', 3, 1, NULL, 'queued', 3)")
        conn.execute("ANALYZE tasks")
        first, second, third = _fits(conn, 4, ["b", "c"], 3)
        _dry_hint(conn, 4, ["b", "c"])
        assert [int(r[0]) for r in conn.execute(CLAIM, (4, ["b", "c"])).fetchall()] == [second]
        parked = conn.execute("SELECT parked FROM tasks WHERE id = %s", (first,)).fetchone()
        running = conn.execute("SELECT running FROM pools WHERE name = 'open'").fetchone()
        assert parked == (True,) and running == (1,)
        assert _small_skip(conn) == "15"
    with _connect(dsn) as conn:
        _dry_hint(conn, 4, ["b", "c"])
        conn.commit()
        ids, calls = _calls_in_transaction(conn, "SELECT id FROM claim_tasks(4, 1, ARRAY['b','c'], 'w', 60, false)")
    assert ids == [third]
    assert calls == {"claim_tasks": 1}, calls


def test_without_the_hint_a_small_listed_claim_looks_first(dsn: str) -> None:
    """Fits dense at the head: no hint, so no step L; the look takes the
    first fit and leaves no hint (step L would read every listed bucket)."""
    with _connect(dsn, autocommit=True) as conn:
        conn.execute("INSERT INTO tasks (queue, payload, priority, required, state, max_attempts) "
                     "SELECT (ARRAY['a','b','c','d'])[1 + g % 4], '{}'::jsonb, g % 3, 1 + g % 6, 'queued', 3 "
                     "FROM generate_series(1, 2000) g")
        conn.execute("ANALYZE tasks")
        for available in (4, 9, 15):
            expected = _fits(conn, available, ["a", "b", "c"], 1)
            got = [int(r[0]) for r in conn.execute(CLAIM, (available, ["a", "b", "c"])).fetchall()]
            assert got == expected
            assert _hint(conn) == ""


@pytest.mark.parametrize("seed", range(4))
def test_small_listed_claims_with_the_hint_match_the_reference(dsn: str, seed: int) -> None:
    """Each claim: a random amount below 16, a random list of 2 to 4 queues,
    the hint set or not, some of the first 12 fits locked elsewhere (now and
    then all of them), pools full (limit 0) or filling (limit 3), and tasks
    enqueued ahead now and then. Each takes exactly what the plain rule takes."""
    rng = random.Random(9100 + seed)
    pools = seed % 2 == 1
    wide = seed < 2
    with _connect(dsn, autocommit=True) as conn:
        conn.execute("INSERT INTO pools (name, running_limit) VALUES ('p0', 0), ('p1', 3)")

        def add(n: int, low: int) -> None:
            for _ in range(n):
                conn.execute(
                    "INSERT INTO tasks (queue, payload, priority, required, pool, state, max_attempts) "
                    "VALUES (%s, '{}', %s, %s, %s, 'queued', 3)",
                    (rng.choice(QUEUES), rng.randint(low, 10**5) if wide else rng.randint(low, 3),
                     rng.randint(0, 30), rng.choice((None, None, None, "p0", "p1")) if pools else None))

        add(500, 0)
        conn.execute("ANALYZE tasks")
        for step in range(60):
            if step % 15 == 7:
                add(3, -5)
            rows, limits = snapshot(dsn)
            available = rng.randint(0, 15)
            listed = sorted(rng.sample(QUEUES, rng.randint(2, 4)))
            fits = sorted((r for r in rows if r.required <= available and r.queue in listed),
                          key=lambda r: (r.priority, r.id))
            lock_all = rng.random() < 0.15
            locked = {r.id for r in fits[:12] if lock_all or rng.random() < 0.3}
            expected = reference(rows, limits, available, 1, listed, "min", locked)
            if rng.random() < 0.7:
                _dry_hint(conn, 15, listed, rng.randint(0, 14))
            with psycopg.connect(dsn) as other:
                other.execute("SELECT id FROM taskqueue.tasks WHERE id = ANY (%s) FOR UPDATE", (list(locked),))
                got = [int(r[0]) for r in conn.execute(CLAIM, (available, listed)).fetchall()]
            assert got == expected, f"step {step}: available={available} listed={listed} locked={len(locked)}"
