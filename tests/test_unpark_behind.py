"""A pool that gets room puts back only the parked tasks a claim could need (migration 0045).

One free slot is taken by one claim, and a claim takes the first task in its
order that fits. So a parked task may stay parked while, in its pool and
queue, as many unparked tasks as the pool has free slots come before it in
both claim orders and need no more than it does. These tests pin which tasks
go back, and that every claim still returns exactly what the plain rule says
while most of a backlog stays parked.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from psycopg import sql

from taskqueue import TaskQueue
from tests.test_claim_exact import reference, snapshot
from tests.test_parking import parked


@pytest.fixture
def tq(dsn: str) -> Iterator[TaskQueue]:
    """A queue whose releases put back only what a claim needs however short the backlog.

    By default a pool with fewer than 1,000 parked tasks gets all of them back
    (taskqueue.unpark_all_below); these tests set it to 0 for their database.
    """
    dbname = psycopg.conninfo.conninfo_to_dict(dsn)["dbname"]
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("ALTER DATABASE {} SET taskqueue.unpark_all_below = 0").format(sql.Identifier(dbname)))
    queue = TaskQueue(dsn)
    try:
        yield queue
    finally:
        queue.close()


def parked_open(dsn: str, pool: str) -> bool:
    with psycopg.connect(dsn) as conn:
        row = conn.execute("SELECT parked_open FROM taskqueue.pools WHERE name = %s", (pool,)).fetchone()
    assert row is not None
    return bool(row[0])


def park_all(tq: TaskQueue, dsn: str, pool: str, specs: list[dict[str, Any]]) -> list[int]:
    """Enqueue ``specs`` into ``pool`` (limit 0) and let one claim walk past and park them all."""
    tq.set_pool_limit(pool, 0)
    ids = tq.enqueue_many([{"payload": i, "pool": pool, **spec} for i, spec in enumerate(specs)])
    plain = tq.enqueue("plain", priority=100)
    got = tq.claim()
    assert got is not None and got.id == plain
    tq.complete(got)
    assert parked(dsn) == ids
    return ids


def test_one_free_slot_puts_back_the_running_minima_of_each_order(tq: TaskQueue, dsn: str) -> None:
    sizes = [5, 7, 3, 3, 8, 1, 2]
    ids = park_all(tq, dsn, "net", [{"required": r, "priority": 0} for r in sizes]
                   + [{"required": 4, "priority": 1}, {"required": 9, "priority": 1}])
    p0, p1 = ids[:7], ids[7:]
    tq.set_pool_limit("net", 1)
    # (priority, id): 5, then 3 (the first of two), then 1; the priority-1 tasks need more than 1.
    # (priority DESC, id): 4 comes first, then 3 and 1 of priority 0.
    back = {p0[0], p0[2], p0[5], p1[0]}
    assert parked(dsn) == [i for i in ids if i not in back]
    assert parked_open(dsn, "net")
    assert tq.check().ok
    for available, order, want in ((None, "min", p0[0]), (3, "min", p0[2]), (2, "min", p0[5]),
                                   (4, "max", p1[0]), (3, "max", p0[2]), (8, "max", p1[0])):
        got = tq.peek(available=available, order=order)  # type: ignore[arg-type]
        assert got is not None and got.id == want, (available, order)


def test_each_free_slot_adds_a_layer(tq: TaskQueue, dsn: str) -> None:
    ids = park_all(tq, dsn, "net", [{"required": 1} for _ in range(10)])
    tq.set_pool_limit("net", 2)  # two free slots: two tasks go back
    assert parked(dsn) == ids[2:]
    assert [t.id for t in tq.claim_many(limit=5)] == ids[:2]  # the pool holds two: exactly those
    assert tq.check().ok


def test_a_cancelled_task_in_front_lets_the_next_one_back(tq: TaskQueue, dsn: str) -> None:
    ids = park_all(tq, dsn, "net", [{"required": 1} for _ in range(5)])
    tq.set_pool_limit("net", 1)
    assert parked(dsn) == ids[1:]
    assert tq.cancel(ids[0])
    assert parked(dsn) == ids[2:]
    assert tq.check().ok
    assert tq.claim().id == ids[1]  # type: ignore[union-attr]


@pytest.mark.parametrize("how", ["no limit", "delete pool"])
def test_a_pool_without_a_limit_or_a_row_gets_its_whole_backlog_back(tq: TaskQueue, dsn: str, how: str) -> None:
    ids = park_all(tq, dsn, "net", [{"required": 1} for _ in range(5)])
    tq.set_pool_limit("net", 1)
    assert parked(dsn) == ids[1:] and parked_open(dsn, "net")
    if how == "no limit":
        tq.set_pool_limit("net", None)
        assert not parked_open(dsn, "net")
    else:
        with psycopg.connect(dsn) as conn:
            conn.execute("DELETE FROM taskqueue.pools WHERE name = 'net'")
    assert parked(dsn) == []
    assert tq.check().ok


def test_below_the_threshold_a_release_puts_back_the_whole_backlog(tq: TaskQueue, dsn: str) -> None:
    ids = park_all(tq, dsn, "net", [{"required": 1} for _ in range(5)])
    with psycopg.connect(dsn) as conn:  # the default, as every other test database has it
        conn.execute("SET taskqueue.unpark_all_below = 1000")
        conn.execute("UPDATE taskqueue.pools SET running_limit = 1 WHERE name = 'net'")
        assert conn.execute("SELECT parked_open FROM taskqueue.pools WHERE name = 'net'").fetchone() == (False,)
    assert parked(dsn) == []
    with psycopg.connect(dsn) as conn:
        conn.execute("DELETE FROM taskqueue.tasks WHERE pool = 'net'")
    ids = park_all(tq, dsn, "web", [{"required": 1} for _ in range(5)])
    with psycopg.connect(dsn) as conn:  # at 5, five parked tasks are not below it: the staircase
        conn.execute("SET taskqueue.unpark_all_below = 5")
        conn.execute("UPDATE taskqueue.pools SET running_limit = 1 WHERE name = 'web'")
    assert parked(dsn) == ids[1:]
    with psycopg.connect(dsn) as conn:  # a value that is not a count is read as the default
        conn.execute("SET taskqueue.unpark_all_below = 'lots'")
        conn.execute("UPDATE taskqueue.pools SET running_limit = 2 WHERE name = 'web'")
    assert parked(dsn) == []
    assert tq.check().ok


def test_a_drained_pool_clears_its_flag(tq: TaskQueue, dsn: str) -> None:
    ids = park_all(tq, dsn, "net", [{"required": 1} for _ in range(3)])
    tq.set_pool_limit("net", 1)
    for want in ids:
        got = tq.claim()
        assert got is not None and got.id == want
        tq.complete(got)
        assert tq.check().ok
    assert parked(dsn) == [] and not parked_open(dsn, "net")


def test_a_stranded_task_behind_too_few_is_reported_and_repaired(tq: TaskQueue, dsn: str) -> None:
    ids = park_all(tq, dsn, "net", [{"required": 1} for _ in range(4)])
    tq.set_pool_limit("net", 1)
    with psycopg.connect(dsn) as conn:  # the one in front leaves behind the triggers' back
        conn.execute("UPDATE taskqueue.tasks SET state = 'cancelled', finished_at = now() WHERE id = %s", (ids[0],))
    report = tq.check()
    assert {v.check for v in report.violations} == {"parked_in_open_pool"}
    assert tq.check(repair=True).ok
    assert tq.claim().id == ids[1]  # type: ignore[union-attr]


def test_the_checker_counts_as_many_tasks_in_front_as_free_slots(tq: TaskQueue, dsn: str) -> None:
    ids = park_all(tq, dsn, "net", [{"required": 1} for _ in range(5)])
    tq.set_pool_limit("net", 2)
    assert parked(dsn) == ids[2:] and tq.check().ok
    with psycopg.connect(dsn) as conn:  # one of the two in front leaves by hand: one left for two slots
        conn.execute("UPDATE taskqueue.tasks SET state = 'cancelled', finished_at = now() WHERE id = %s", (ids[0],))
    with psycopg.connect(dsn) as conn:
        rows = conn.execute("SELECT task_id FROM taskqueue.invariant_parked_in_open_pool ORDER BY 1").fetchall()
    assert [r[0] for r in rows] == ids[2:]
    assert tq.check(repair=True).ok
    assert parked(dsn) == []


def _age_pools(dsn: str) -> None:
    """As if every pool was freed more than a second ago: claims park their tasks (park_rows v4)."""
    with psycopg.connect(dsn) as conn:
        conn.execute("UPDATE taskqueue.pools SET freed_at = freed_at - interval '2 seconds' WHERE freed_at IS NOT NULL")


@pytest.mark.parametrize("seed", range(4))
def test_claims_match_the_plain_rule_while_backlogs_stay_parked(tq: TaskQueue, dsn: str, seed: int) -> None:
    """Small pools (limits 1 to 3) that fill and free all the time, sizes in random order, both orders,
    batches, lists, cancels and limit changes: every peek and claim agrees with the reference, the
    checker finds nothing, and a good share of each backlog stays parked through its releases."""
    rng = random.Random(4500 + seed)
    pools = ["p0", "p1", "p2"]
    for pool in pools:
        tq.set_pool_limit(pool, rng.randint(1, 3))
    tq.enqueue_many(
        {"payload": i, "pool": rng.choice([*pools, *pools, None]), "priority": rng.randint(0, 3),
         "required": rng.randint(0, 30), "queue": rng.choice(["a", "b"])}
        for i in range(400)
    )
    held: list[Any] = []
    most_parked = 0
    for step in range(120):
        _age_pools(dsn)
        rows, limits = snapshot(dsn)
        if not rows:
            break
        available = rng.choice([None, rng.randint(0, 40)])
        limit = rng.choice([1, 1, 1, 3])
        queues = rng.choice([None, None, ["a"], ["a", "b"]])
        order = rng.choice(["min", "max"])
        expected = reference(rows, limits, available, limit, queues, order, set())
        peeked = tq.peek(available=available, queues=queues, order=order)  # type: ignore[arg-type]
        assert [t.id for t in ([peeked] if peeked else [])] == expected[:1], f"step {step}: peek"
        got = tq.claim_many(available=available, limit=limit, queues=queues, order=order)  # type: ignore[arg-type]
        assert [t.id for t in got] == expected, f"step {step}: available={available} limit={limit} {order}"
        held += got
        rng.shuffle(held)
        while held and rng.random() < 0.5:
            task = held.pop()
            if rng.random() < 0.2:
                tq.fail(task, "again", retry_in=0)
            else:
                tq.complete(task)
        if rng.random() < 0.05:
            tq.set_pool_limit(rng.choice(pools), rng.randint(1, 3))
        if rng.random() < 0.1 and rows:
            tq.cancel(rng.choice(rows).id)
        most_parked = max(most_parked, len(parked(dsn)))
        report = tq.check()
        assert report.ok, (step, report.violations)
    assert most_parked >= 50  # the backlogs were parked, and stayed so through releases


def test_a_forerunner_held_without_its_slot_hides_the_task_behind_it_until_released(tq: TaskQueue, dsn: str) -> None:
    """The documented trade (unpark_behind): a claim skips a locked row, and with it what is parked behind.

    A claim that holds the forerunner takes the slot with it, so nothing else could have run; a
    transaction that holds it and takes no slot (here a bare FOR UPDATE) hides the rest until it ends.
    """
    ids = park_all(tq, dsn, "net", [{"required": 1} for _ in range(3)])
    tq.set_pool_limit("net", 1)
    assert parked(dsn) == ids[1:]
    with psycopg.connect(dsn) as other:
        other.execute("SELECT 1 FROM taskqueue.tasks WHERE id = %s FOR UPDATE", (ids[0],))
        assert tq.claim() is None
    got = tq.claim()
    assert got is not None and got.id == ids[0]
    assert tq.check().ok
