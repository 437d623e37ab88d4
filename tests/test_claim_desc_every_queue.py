"""A descending claim over every queue reads the order over every queue (claim_tasks v21).

With no queue list, order="max" and 16 or more left (or no amount), v20
listed every queue with claimable tasks and merged a window of each. Such a
window ends at the shortest queue's last key, so over 1,000 queues it read a
few rows for a probe of every queue: 127 ms a claim at 200,000 tasks, 0.01x
the naive query. v21 reads ix_tasks_claim_any, one descent per priority, and
lists queues only when its walk has gone as far as their buckets are worth;
v22 reads the priorities below the current one from ix_tasks_claim_desc
(priority DESC, id), one plain walk, so where every task has its own
priority a row no longer costs two descents.
It must still take exactly what the plain rule takes (tests/test_claim_exact.py's
reference): single claims and batches, pools full and open, rows locked
elsewhere, priorities few or each its own.
"""

from __future__ import annotations

import random
from typing import Any

import psycopg
import pytest

from taskqueue import TaskQueue
from tests.test_claim_exact import claims_match_the_reference, reference, snapshot
from tests.test_claim_plan import _calls_in_transaction, _function_calls, explain, third_run

QUEUES = [f"q{i:03d}" for i in range(150)]
# Buffers a claim may read over 20,000 tasks, each its own priority (v22: 28 and 1,661; v21: 940 and 197,749).
BUDGET_DISTINCT = {1: 150, 10: 6_000}


def piles(rng: random.Random, n: int, *, distinct: bool) -> list[Any]:
    """Tasks too big for most amounts at the best priorities, the rest spread; priorities few or each its own."""
    specs: list[Any] = []
    for i in range(n):
        big = i < n // 4
        priority = (n - i if big else rng.randint(0, n)) if distinct else (9 if big else rng.randint(0, 8))
        specs.append({
            "payload": {},
            "queue": rng.choice(QUEUES),
            "priority": priority,
            "required": rng.choice((5000, 100000)) if big else rng.choice((1, 16, 40, 100, 900, 4000)),
            "pool": rng.choice((None, None, None, "p0", "p1")),
        })
    return specs


@pytest.mark.parametrize("seed,distinct", [(0, False), (1, True), (2, False)])
def test_descending_claims_over_every_queue_match_the_reference(
    tq: TaskQueue, dsn: str, seed: int, distinct: bool
) -> None:
    rng = random.Random(700 + seed)
    tq.enqueue_many(piles(rng, 1500, distinct=distinct))
    tq.set_pool_limit("p0", 0)
    tq.set_pool_limit("p1", 15)
    claims_match_the_reference(tq, dsn, rng, lambda: rng.choice((16, 50, 120, 1000, 4500, 10**6)),
                               limits=(1, 1, 2, 7), steps=24)


def test_a_descending_claim_of_everything_over_every_queue_matches_the_reference(tq: TaskQueue, dsn: str) -> None:
    """No amount (every task fits), with the best priority's rows locked elsewhere and a full pool."""
    rng = random.Random(17)
    tq.enqueue_many(piles(rng, 800, distinct=False))
    tq.set_pool_limit("p0", 0)
    rows, pools = snapshot(dsn)
    best = sorted(rows, key=lambda r: (-r.priority, r.id))
    locked = {r.id for r in best[:40] if rng.random() < 0.5}
    expected = reference(rows, pools, None, 30, None, "max", locked)
    with psycopg.connect(dsn) as other:
        other.execute("SELECT id FROM taskqueue.tasks WHERE id = ANY (%s) FOR UPDATE", (list(locked),))
        got = tq.claim_many(available=None, limit=30, order="max")
    assert [t.id for t in got] == expected


def _seed(conn: psycopg.Connection, dsn: str, pile: int) -> None:
    """2,000 queues, 10,000 tasks, priorities 0..9; the first ``pile`` at priority 10 too big for 500."""
    conn.execute("SELECT set_config('search_path', 'taskqueue', false)")
    conn.execute(
        "INSERT INTO tasks (queue, payload, priority, required, state, max_attempts) "
        "SELECT 'q' || (g %% 2000), '{}'::jsonb, CASE WHEN g <= %s THEN 10 ELSE (g * 31) %% 10 END, "
        "CASE WHEN g <= %s THEN 1000 ELSE 1 + (g * 19) %% 1000 END, 'queued', 3 FROM generate_series(1, 10000) g",
        (pile, pile),
    )
    conn.commit()
    with psycopg.connect(dsn, autocommit=True) as vac:
        vac.execute("VACUUM ANALYZE taskqueue.tasks")


def _expected(conn: psycopg.Connection, available: int | None, limit: int) -> list[int]:
    left = 2**62 if available is None else available
    expected: list[int] = []
    for task_id, required in conn.execute("SELECT id, required FROM tasks ORDER BY priority DESC, id"):
        if required <= left and len(expected) < limit:
            expected.append(task_id)
            left -= required
    conn.rollback()
    return expected


@pytest.mark.parametrize("available,limit", [(500, 1), (500, 20), (None, 1), (None, 20)])
def test_a_descending_claim_over_every_queue_reads_one_head(dsn: str, available: int | None, limit: int) -> None:
    """A dense head over 2,000 queues costs what it costs over one: v20
    listed the 2,000 queues (a probe each) and merged a window of each."""
    with psycopg.connect(dsn) as conn:
        _seed(conn, dsn, 0)
        expected = _expected(conn, available, limit)
        sql = "SELECT * FROM claim_tasks(%s, %s, NULL, 'w', 60, true)" % (
            "NULL" if available is None else available, limit)
        buffers, rows, got = third_run(conn, sql)
    assert got == expected
    assert rows == len(expected) > 0
    assert buffers < 60 + 15 * limit, f"{buffers} buffers for a descending claim of {limit} over 2,000 queues"


@pytest.mark.parametrize("limit", [1, 20])
def test_a_descending_claim_over_many_queues_walks_a_pile_before_it_asks_each_queue(dsn: str, limit: int) -> None:
    """Past 300 tasks too big at the best priority, the claim reads on along
    the order over every queue, then lists queues only as far as its walk
    has gone: it does not ask the buckets of 2,000 queues."""
    with psycopg.connect(dsn) as conn:
        _seed(conn, dsn, 300)
        expected = _expected(conn, 500, limit)
        sql = f"SELECT * FROM claim_tasks(500, {limit}, NULL, 'w', 60, true)"
        explain(conn, sql)
        explain(conn, sql)
        buffers, plan = explain(conn, sql)
        ids, calls = _calls_in_transaction(conn, sql.replace("*", "id"))
    assert ids == expected
    assert len(ids) == 1 if limit == 1 else len(ids) > 1
    if limit == 1:
        assert calls.get("fit_candidate", 0) == 0, calls  # the walk found it: no queue's buckets asked
    budget = 1000 if limit == 1 else 2500 * len(ids)
    assert buffers < budget, f"{buffers} buffers for a descending claim of {limit} over 2,000 queues"


def test_one_queue_with_claimable_tasks_keeps_its_own_descending_claim(dsn: str) -> None:
    """Other queues hold only running tasks: the claim goes on as that queue's
    (its dry-look hint, 'desc:' and the queue), as when it was listed."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("SELECT set_config('search_path', 'taskqueue', false)")
        conn.execute(
            "INSERT INTO tasks (queue, payload, priority, required, state, max_attempts) "
            "SELECT 'only', '{}'::jsonb, 5, CASE WHEN g <= 1000 THEN 600000 + g ELSE 1 + (g * 7919) % 1000000 END, "
            "'queued', 3 FROM generate_series(1, 3000) g")
        conn.execute("INSERT INTO tasks (queue, payload, priority, required, state, max_attempts, worker, "
                      "lease_token, lease_seconds, lease_expires_at, started_at, attempts) "
                      "SELECT 'other' || g, '{}'::jsonb, 9, 1, 'running', 3, 'w', gen_random_uuid(), 60, "
                      "now() + interval '60 seconds', now(), 1 FROM generate_series(1, 5) g")
        conn.execute("VACUUM ANALYZE tasks")
        first = conn.execute("SELECT id FROM tasks WHERE state = 'queued' AND required <= 500000 "
                             "ORDER BY priority DESC, id LIMIT 1").fetchone()
        got = conn.execute("SELECT id FROM claim_tasks(500000, 1, NULL, 'w', 60, true)").fetchone()
        hint = conn.execute("SELECT current_setting('taskqueue.dry_look', true)").fetchone()
    assert got == first
    assert hint == ("500000:0:desc:only",)


def test_a_descending_claim_remembers_how_far_its_walk_listed_queues(dsn: str) -> None:
    """Past a pile of 1,500 tasks too big, the first claim lists queues as
    its walk outgrows them and keeps their count in the session; the next
    claim's first window walks that far before it lists any, so it only
    asks whether several queues have tasks. A count gone stale (0, or far
    too many) changes how far it walks, never what it takes."""
    with psycopg.connect(dsn) as conn:
        _seed(conn, dsn, 1500)
        conn.execute("SELECT set_config('taskqueue.queue_count', '', false)")
        conn.commit()
        sql = "SELECT id FROM claim_tasks(500, 1, NULL, 'w', 60, true)"
        expected = _expected(conn, 500, 1)
        conn.execute("SET LOCAL track_functions = 'pl'")
        ids = [r[0] for r in conn.execute(sql).fetchall()]
        first = _function_calls(conn)
        count = conn.execute("SELECT current_setting('taskqueue.queue_count', true)").fetchone()
        conn.rollback()  # the claim's setting goes with it: set again below, as its commit would keep it
        assert ids == expected
        assert first.get("claimable_queues", 0) >= 2, first  # the check, then a listing
        assert count is not None and int(count[0]) > 1
    with psycopg.connect(dsn) as conn:  # a backend of its own, whose call counts start at 0
        conn.execute("SELECT set_config('search_path', 'taskqueue', false)")
        conn.execute("SELECT set_config('taskqueue.queue_count', %s, false)", (count[0],))
        conn.commit()
        ids, second = _calls_in_transaction(conn, sql)
        assert ids == expected
        assert second.get("claimable_queues", 0) == 1, second  # the check only: no listing
        for stale in ("0", "1", "2", "100000", "x"):
            conn.execute("SELECT set_config('taskqueue.queue_count', %s, false)", (stale,))
            conn.commit()
            ids, _ = _calls_in_transaction(conn, sql)
            assert ids == expected, stale


def _seed_deadlines(conn: psycopg.Connection, dsn: str) -> None:
    """2,000 queues, 20,000 tasks, each its own priority; sizes 1..1M (MB), so 2% fit 20,000."""
    conn.execute("SELECT set_config('search_path', 'taskqueue', false)")
    conn.execute(
        "INSERT INTO tasks (queue, payload, priority, required, state, max_attempts) "
        "SELECT 'q' || (g * 17) % 2000, '{}'::jsonb, g, 1 + (g * 7919) % 1000000, 'queued', 3 "
        "FROM generate_series(1, 20000) g")
    conn.commit()
    with psycopg.connect(dsn, autocommit=True) as vac:
        vac.execute("VACUUM ANALYZE taskqueue.tasks")


@pytest.mark.parametrize("limit", [1, 10])
def test_a_descending_walk_over_distinct_priorities_is_one_walk(dsn: str, limit: int) -> None:
    """Where every task has its own priority, the walk reads them in one
    index walk (v22): v21 read two descents of ix_tasks_claim_any for every
    row its walk passed."""
    with psycopg.connect(dsn) as conn:
        _seed_deadlines(conn, dsn)
        expected = _expected(conn, 20000, limit)
        sql = f"SELECT * FROM claim_tasks(20000, {limit}, NULL, 'w', 60, true)"
        buffers, rows, got = third_run(conn, sql)
    assert got == expected
    assert rows == len(expected) > 0
    assert buffers < BUDGET_DISTINCT[limit], f"{buffers} buffers for a descending claim of {limit}"


@pytest.mark.parametrize("seed", [3, 4])
def test_descending_claims_over_distinct_priorities_match_the_reference(tq: TaskQueue, dsn: str, seed: int) -> None:
    """Chunks that end inside a priority, priorities of one task and of many, pools and amounts."""
    rng = random.Random(900 + seed)
    specs = [{"payload": {}, "queue": rng.choice(QUEUES),
              "priority": rng.randint(0, 60) if rng.random() < 0.5 else rng.randint(0, 100000),
              "required": rng.choice((1, 16, 40, 100, 900, 4000, 5000, 100000)),
              "pool": rng.choice((None, None, None, "p0", "p1"))} for _ in range(1500)]
    tq.enqueue_many(specs)
    tq.set_pool_limit("p0", 0)
    tq.set_pool_limit("p1", 15)
    claims_match_the_reference(tq, dsn, rng, lambda: rng.choice((16, 50, 120, 1000, 4500, 10**6)),
                               limits=(1, 1, 3, 9), steps=24)
