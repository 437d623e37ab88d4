"""One task in descending order over one queue looks along claim order (claim_tasks v34).

Before version 34 such a claim read a window of two priorities at most (the
rest of the current one and the next), then asked the buckets. With a few
tasks a priority and the ones too big piling up at the head, spread over many
priorities, every claim fell to fit_candidate (the second random draw's r27:
0.56x the naive query). The look reads ix_tasks_claim backwards in chunks and
sorts whole priorities into (priority DESC, id) order.
"""

from __future__ import annotations

import random

import psycopg
import pytest

from taskqueue import TaskQueue
from tests.test_claim_exact import single_claims_match_the_reference
from tests.test_claim_plan import _calls_in_transaction, explain

pytestmark = pytest.mark.slow

# Priorities that are epoch seconds of one day, 2-3 tasks each; sizes rise with
# id, so the newest tenth is too big for 900,001 (bench shape epoch_rising_max).
EPOCH_RISING = (
    "INSERT INTO tasks (queue, payload, priority, required, state, max_attempts) "
    "SELECT 'default', '{}'::jsonb, 1700000000 + (g * 7919) %% 86400, 1 + g::bigint * 1000000 / %(n)s, 'queued', 3 "
    "FROM generate_series(1, %(n)s) g"
)

# Every task its own priority, in no order of id; sizes rise with id, so half fit 500,001 (shuffled_rising_max).
SHUFFLED_RISING = (
    "INSERT INTO tasks (queue, payload, priority, required, state, max_attempts) "
    "SELECT 'default', '{}'::jsonb, (g * 7919) %% %(n)s, 1 + g * 1000000 / %(n)s, 'queued', 3 "
    "FROM generate_series(1::bigint, %(n)s) g"
)


def _first_fits(conn: psycopg.Connection, available: int, count: int) -> list[int]:
    return [r[0] for r in conn.execute(
        "SELECT id FROM tasks WHERE state = 'queued' AND required <= %s ORDER BY priority DESC, id LIMIT %s",
        (available, count)).fetchall()]


def _pile_at_the_head(dsn: str, conn: psycopg.Connection, insert: str, params: dict[str, int], pile: int,
                      available: int) -> list[int]:
    """Seed with ``insert``, make the best ``pile`` tasks in claim order too big, vacuum: the reference's first fit."""
    conn.execute("SELECT set_config('search_path', 'taskqueue', false)")
    conn.execute(insert, params)
    conn.execute("UPDATE tasks SET required = 950000 WHERE id IN "
                 "(SELECT id FROM tasks ORDER BY priority DESC, id LIMIT %s)", (pile,))
    conn.commit()
    with psycopg.connect(dsn, autocommit=True) as vac:
        vac.execute("VACUUM ANALYZE taskqueue.tasks")
    first = _first_fits(conn, available, 1)
    conn.rollback()
    return first


def test_a_pile_spread_over_many_priorities_is_read_without_the_buckets(dsn: str) -> None:
    """200,000 tasks of the epoch shape with a pile of 300 too big at the head
    (about 120 priorities): the claim is the naive query's task, reads what
    the pile holds and no more (buffers bounded), and never calls
    fit_candidate. Version 33 called it on every such claim."""
    with psycopg.connect(dsn) as conn:
        first = _pile_at_the_head(dsn, conn, EPOCH_RISING, {"n": 200_000}, 300, 900_001)
        sql = "SELECT * FROM claim_tasks(900001, 1, ARRAY['default'], 'w', 60, true)"
        explain(conn, sql)
        buffers, _ = explain(conn, sql)
        ids, calls = _calls_in_transaction(conn, sql.replace("*", "id"))
    assert ids == first
    assert "fit_candidate" not in calls, calls
    assert buffers < 2000, f"{buffers} buffers to read a pile of 300 rows"


def test_claims_over_few_tasks_a_priority_take_the_naive_querys_tasks(dsn: str) -> None:
    """200 claims on the epoch shape (4,000 tasks) in one transaction, the
    pile growing as they go: each takes the naive query's task, and none of
    them asks the buckets while the pile is shorter than the look's budget."""
    with psycopg.connect(dsn) as conn:
        conn.execute("SELECT set_config('search_path', 'taskqueue', false)")
        conn.execute(EPOCH_RISING, {"n": 4000})
        conn.commit()
        with psycopg.connect(dsn, autocommit=True) as vac:
            vac.execute("VACUUM ANALYZE taskqueue.tasks")
        try:
            conn.execute("SET LOCAL track_functions = 'pl'")
        except psycopg.errors.InsufficientPrivilege:
            pytest.skip("counting function calls needs a role that may set track_functions")
        for n in range(200):
            expected = _first_fits(conn, 900_001, 1)
            got = conn.execute("SELECT id FROM claim_tasks(900001, 1, ARRAY['default'], 'w', 60, true)").fetchall()
            assert [r[0] for r in got] == expected, n
        calls = conn.execute("SELECT COALESCE(sum(calls), 0) FROM pg_stat_xact_user_functions "
                             "WHERE funcname = 'fit_candidate'").fetchone()
        # The pile: tasks too big ahead of the last task taken, in claim order.
        pile = conn.execute("SELECT count(*) FROM tasks WHERE state = 'queued' AND required > 900001 AND priority > "
                            "(SELECT min(priority) FROM tasks WHERE state = 'running')").fetchone()
        conn.rollback()
    assert pile is not None and pile[0] > 10, pile  # it did grow
    assert calls == (0,), calls


@pytest.mark.parametrize("seed", range(4))
def test_single_descending_claims_behind_spread_piles_match_the_reference(tq: TaskQueue, dsn: str, seed: int) -> None:
    """Random data with 1-4 tasks a priority and some priorities of hundreds,
    piles of tasks too big at the best priorities (around the look's first
    chunk and its budget), pools full or tight, a few rows locked elsewhere
    among the first fits: every single descending claim of one queue (of
    three, or the only one with claimable tasks) is the reference's."""
    rng = random.Random(900 + seed)
    specs: list[dict[str, object]] = []
    queues = ("a",) if seed % 2 else ("a", "b", "c")
    for p in range(400):
        size = rng.choice((1, 1, 2, 3, 4, 300)) if p % 37 else 300
        for _ in range(size):
            too_big = p > 400 - rng.choice((5, 20, 60))
            specs.append({
                "payload": {}, "queue": rng.choice(queues), "priority": p * 1000 + rng.randint(0, 1),
                "required": 600_000 + rng.randint(0, 9) if too_big and rng.random() < 0.9 else rng.randint(1, 590_000),
                "pool": rng.choice((None, None, None, "p0", "p1")),
            })
    tq.enqueue_many(specs)
    tq.set_pool_limit("p0", 0)
    tq.set_pool_limit("p1", 3)
    single_claims_match_the_reference(
        tq, dsn, rng, lambda: rng.choice((16, 300_000, 590_000, None)), lambda: ["a"], "max",
        lock_among=30, lock_share=0.2)


@pytest.mark.parametrize("fit_below", [True, False])
def test_a_priority_longer_than_every_chunk_is_not_the_end_of_the_queue(dsn: str, fit_below: bool) -> None:
    """Three tasks too big at priority 9, then 2,000 too big at priority 5,
    longer than the look's budget (and than version 34's last chunk, 512):
    the look ends inside priority 5 and must not take that for the end of
    the queue. A fit at priority 1 is found; with none, the claim is empty."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("SELECT set_config('search_path', 'taskqueue', false)")
        conn.execute("INSERT INTO tasks (queue, payload, priority, required, state, max_attempts) "
                     "SELECT 'default', '{}'::jsonb, CASE WHEN g <= 3 THEN 9 ELSE 5 END, 900000, 'queued', 3 "
                     "FROM generate_series(1, 2003) g")
        if fit_below:
            conn.execute("INSERT INTO tasks (queue, payload, priority, required, state, max_attempts) "
                         "VALUES ('default', '{}', 1, 10, 'queued', 3)")
        conn.execute("VACUUM ANALYZE tasks")
        expected = _first_fits(conn, 500_000, 1)
        got = conn.execute("SELECT id FROM claim_tasks(500000, 1, ARRAY['default'], 'w', 60, true)").fetchall()
    assert [r[0] for r in got] == expected
    assert len(expected) == (1 if fit_below else 0)


def test_the_walk_reads_a_pile_once(dsn: str) -> None:
    """Every task its own priority, in no order of id, half fitting, and a
    pile of 400 too big at the head (bench shape shuffled_rising_max): the
    claim reads about what the naive walk of the same index reads, plus its
    first statement's few rows. Version 34 read chunks doubling past the
    pile (573 buffers against the walk's 413; version 35: 459)."""
    with psycopg.connect(dsn) as conn:
        first = _pile_at_the_head(dsn, conn, SHUFFLED_RISING, {"n": 200_000}, 400, 500_001)
        sql = "SELECT * FROM claim_tasks(500001, 1, ARRAY['default'], 'w', 60, true)"
        walk = ("SELECT id FROM tasks WHERE queue = 'default' AND state = 'queued' AND NOT parked "
                "AND required <= 500001 ORDER BY priority DESC, id DESC LIMIT 1")
        explain(conn, sql)
        buffers, _ = explain(conn, sql)
        explain(conn, walk)
        walked, _ = explain(conn, walk)
        got = [r[0] for r in conn.execute(sql.replace("*", "id")).fetchall()]
        conn.rollback()
    assert got == first
    assert buffers <= walked + 100, f"{buffers} buffers where the naive walk reads {walked}"


@pytest.mark.parametrize("pile_above", [True, False])
def test_a_priority_whose_oldest_fit_is_past_the_budget(dsn: str, pile_above: bool) -> None:
    """One priority of 3,000 tasks whose newest 100 fit: the walk backwards
    meets those first, but the claim is the oldest of them, 2,900 rows into
    the priority in id order, past what the forward read may read. The claim
    takes it (from the buckets), not a newer fit and not a task at a lower
    priority that fits."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("SELECT set_config('search_path', 'taskqueue', false)")
        if pile_above:
            conn.execute("INSERT INTO tasks (queue, payload, priority, required, state, max_attempts) "
                         "SELECT 'default', '{}'::jsonb, 9, 900000, 'queued', 3 FROM generate_series(1, 50)")
        conn.execute("INSERT INTO tasks (queue, payload, priority, required, state, max_attempts) "
                     "SELECT 'default', '{}'::jsonb, 5, 3001 - g, 'queued', 3 FROM generate_series(1, 3000) g")
        conn.execute("INSERT INTO tasks (queue, payload, priority, required, state, max_attempts) "
                     "VALUES ('default', '{}', 1, 1, 'queued', 3)")
        conn.execute("VACUUM ANALYZE tasks")
        expected = _first_fits(conn, 100, 3)
        got = []
        for _ in range(3):
            got += [r[0] for r in conn.execute(
                "SELECT id FROM claim_tasks(100, 1, ARRAY['default'], 'w', 60, true)").fetchall()]
    assert got == expected
    assert len(set(got)) == 3
