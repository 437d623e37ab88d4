"""A claim of several tasks takes few fits from one read of them (claim_tasks v40, migration 0055).

Over many queues with few fits spread along the claim order, claim_many
walked the shared order between them (15,053 buffers for claim_many(100) at
200,000 tasks over 1,000 queues). Now, once the session knows (or counts)
that the fits are few, step M reads every fit after its key in claim order
and takes them in that order, each one that still fits what is left. What is
taken must stay the plain rule's packing whichever way it is found: both
orders, lists of queues, full pools, rows locked elsewhere.
"""

from __future__ import annotations

import random
from typing import Any

import psycopg
import pytest

from taskqueue import TaskQueue
from tests.test_claim_exact import Row, reference
from tests.test_claim_plan import explain
from tests.test_multiprocess import _run

AVAILABLE = 1_000
QUEUES = 60
LIST = [f"q{i}" for i in range(0, QUEUES, 6)]  # 10 of the 60: step M serves lists of 4 to 128
HINTS = "SELECT current_setting('taskqueue.fit_scan', true), current_setting('taskqueue.fit_probe', true)"


def _seed(conn: psycopg.Connection, rng: random.Random, rows: int, fits: int, pools: bool) -> None:
    """Every task its own priority, most too big; ``fits`` of them need 1..AVAILABLE, spread along the order."""
    conn.execute("SELECT set_config('search_path', 'taskqueue', false)")
    fitting = set(rng.sample(range(rows), fits))
    specs = []
    for g in range(rows):
        required = rng.randint(1, AVAILABLE // 4) if g in fitting else AVAILABLE + 1 + rng.randint(0, 10**6)
        pool = rng.choice((None, None, "p0", "p1", "p2")) if pools else None
        specs.append((f"q{rng.randrange(QUEUES)}", rng.randint(-10**9, 10**9), required, pool))
    with conn.cursor() as cur:
        cur.executemany(
            "INSERT INTO tasks (queue, payload, priority, required, pool, state, max_attempts) "
            "VALUES (%s, '{}', %s, %s, %s, 'queued', 3)", specs)
    if pools:
        conn.execute("INSERT INTO pools (name, running_limit, running) VALUES ('p0', 0, 0), ('p1', 2, 0), "
                     "('p2', NULL, 0) ON CONFLICT (name) DO UPDATE SET running_limit = excluded.running_limit")
    conn.execute("ANALYZE tasks")


def _state(conn: psycopg.Connection) -> tuple[list[Row], dict[str, tuple[int | None, int]]]:
    rows = conn.execute("SELECT id, queue, priority, required, pool FROM tasks WHERE state = 'queued'").fetchall()
    pools = conn.execute("SELECT name, running_limit, running FROM pools").fetchall()
    return [Row(*r) for r in rows], {name: (lim, run) for name, lim, run in pools}


def _claim(conn: psycopg.Connection, available: int, limit: int, queues: list[str] | None,
           descending: bool) -> list[int]:
    return [r[0] for r in conn.execute("SELECT id FROM claim_tasks(%s, %s, %s, 'w', 60, %s)",
                                       (available, limit, queues, descending)).fetchall()]


def _finish(conn: psycopg.Connection, ids: list[int]) -> None:
    """Done, its pool slot given back, as complete() does."""
    for pool, in conn.execute("SELECT pool FROM tasks WHERE id = ANY (%s) AND pool IS NOT NULL", (ids,)).fetchall():
        conn.execute("UPDATE pools SET running = running - 1 WHERE name = %s", (pool,))
    conn.execute("UPDATE tasks SET state = 'done', finished_at = now(), lease_token = NULL, lease_expires_at = NULL "
                 "WHERE id = ANY (%s)", (ids,))


@pytest.mark.parametrize("pools", [False, True])
@pytest.mark.parametrize("descending", [False, True])
def test_batches_over_few_fits_match_the_plain_rule(dsn: str, descending: bool, pools: bool) -> None:
    rng = random.Random(7 + 2 * descending + pools)
    order = "max" if descending else "min"
    with psycopg.connect(dsn, autocommit=True) as conn:
        _seed(conn, rng, 6_000, 120, pools)
        hints = []
        for step in range(30):
            rows, pool_state = _state(conn)
            available = AVAILABLE if step == 0 else rng.choice((AVAILABLE, AVAILABLE, 300, 40))
            limit = rng.choice((3, 10, 100))
            queues = rng.choice((None, None, LIST))
            expected = reference(rows, pool_state, available, limit, queues, order, set())
            with conn.transaction():
                got = _claim(conn, available, limit, queues, descending)
            assert got == expected, f"step {step}: available={available} limit={limit} queues={queues}"
            hints.append(conn.execute(HINTS).fetchone()[0])
            if rng.random() < 0.7:
                _finish(conn, got)
        assert conn.execute("SELECT * FROM taskqueue.invariant_violations").fetchall() == []
    # The first batch counted the fits (120, within the count's first budget of 128) and said so.
    assert hints[0] == f"few:{AVAILABLE}", hints


def test_rows_locked_elsewhere_are_passed_over(dsn: str) -> None:
    rng = random.Random(31)
    with psycopg.connect(dsn, autocommit=True) as conn, psycopg.connect(dsn) as other:
        _seed(conn, rng, 4_000, 100, True)
        rows, pool_state = _state(conn)
        fits = [r.id for r in rows if r.required <= AVAILABLE]
        locked = set(rng.sample(fits, 30))
        other.execute("SELECT id FROM taskqueue.tasks WHERE id = ANY (%s) FOR UPDATE", (list(locked),))
        for limit in (5, 40, 100):
            expected = reference(rows, pool_state, AVAILABLE, limit, None, "min", locked)
            with conn.transaction():
                got = _claim(conn, AVAILABLE, limit, None, False)
            assert got == expected, limit
            _finish(conn, got)
            rows, pool_state = _state(conn)
        other.rollback()


def test_a_batch_reads_the_fits_not_the_walk_between_them(dsn: str) -> None:
    """60 fits among 20,000 tasks: with the count skipped (the general way) claim_many(4) walks the shared
    order between its fits; step M reads their one index range and takes them. Warm both first."""
    rng = random.Random(5)
    with psycopg.connect(dsn) as conn:
        _seed(conn, rng, 20_000, 60, False)
        conn.commit()
        with psycopg.connect(dsn, autocommit=True) as vac:
            vac.execute("VACUUM ANALYZE taskqueue.tasks")
        sql = f"SELECT * FROM claim_tasks({AVAILABLE}, 4, NULL, 'w', 60, false)"  # any 4 fits fit together
        buffers: dict[str, int] = {}
        for probe in ("", "1024:200") * 3:  # each explain is rolled back, its settings with it
            conn.execute("SELECT set_config('taskqueue.fit_probe', %s, false)", (probe,))
            conn.commit()
            buffers[probe], plan = explain(conn, sql)
            assert plan["Actual Rows"] == 4
    assert buffers[""] * 5 < buffers["1024:200"], buffers


def _batches_until_empty(dsn: str, start: Any, out: Any, index: int) -> None:
    """claim_many of 10 over every queue (every other process: descending), each batch completed at once."""
    got: list[tuple[int, int, str | None]] = []
    with TaskQueue(dsn, pool_size=1, max_overflow=0) as tq:
        start.wait(60)
        empty = 0
        while empty < 3:  # a batch can come back empty while the others hold the last fits
            batch = tq.claim_many(available=AVAILABLE, limit=10, order="max" if index % 2 else "min")
            if not batch:
                empty += 1
                continue
            empty = 0
            assert sum(t.required for t in batch) <= AVAILABLE
            got.extend((t.id, t.required, t.pool) for t in batch)
            tq.complete_many([(t, None) for t in batch])
    out.put(got)


@pytest.mark.slow
def test_four_processes_take_every_few_fit_once(dsn: str) -> None:
    """Four sessions take the same few fits by step M at once: each fit exactly once, none too big, and the
    pools' counts exact at the end (each batch is completed before the next)."""
    rng = random.Random(3)
    with psycopg.connect(dsn, autocommit=True) as conn:
        _seed(conn, rng, 8_000, 120, True)
        conn.execute("UPDATE pools SET running_limit = 3 WHERE name = 'p0'")
        fits = {r[0] for r in conn.execute("SELECT id FROM tasks WHERE required <= %s", (AVAILABLE,))}
    results = _run(_batches_until_empty, dsn)  # four processes, released together
    taken = [tid for part in results for tid, _, _ in part]
    assert len(taken) == len(set(taken)), "a fit was claimed twice"
    assert set(taken) == fits, "every fit is taken, and nothing else"
    with psycopg.connect(dsn) as conn:
        assert conn.execute("SELECT * FROM taskqueue.invariant_violations").fetchall() == []
        assert conn.execute("SELECT sum(running) FROM taskqueue.pools").fetchone() == (0,)
        assert conn.execute("SELECT count(*) FROM taskqueue.tasks WHERE state <> 'done' AND required <= %s",
                            (AVAILABLE,)).fetchone() == (0,)
