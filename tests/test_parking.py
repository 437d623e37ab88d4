"""Parking: a claim takes full pools' tasks out of the claim index; a free slot puts them back.

The invariant behind it: at every commit a parked task's pool exists and is
full, or (past 1,000 parked tasks, migration 0045; tests/test_unpark_behind.py)
has as many free slots as there are unparked tasks of its pool and queue that
come before it in both claim orders and need no more than it does. So parking
never changes what a claim returns, only what it walks.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from taskqueue import PoolStats, TaskQueue
from tests.support.apis import tq  # noqa: F401  (the contract runs against both APIs)


def parked(dsn: str) -> list[int]:
    with psycopg.connect(dsn) as conn:
        rows = conn.execute(
            "SELECT id FROM taskqueue.tasks WHERE parked AND state = 'queued' ORDER BY id"
        ).fetchall()
    return [r[0] for r in rows]


@pytest.fixture
def full_pool(tq: TaskQueue, dsn: str) -> Iterator[tuple[TaskQueue, object, list[int], int]]:
    """Pool 'net' (limit 1) runs one task; three more wait behind it, then one plain task."""
    tq.set_pool_limit("net", 1)
    ids = tq.enqueue_many([{"payload": i, "pool": "net"} for i in range(4)])
    plain = tq.enqueue("plain")
    running = tq.claim()
    assert running is not None and running.id == ids[0]
    yield tq, running, ids[1:], plain


def test_claim_parks_full_pool_tasks_it_walks_past(full_pool, dsn: str) -> None:  # type: ignore[no-untyped-def]
    tq, _running, waiting, plain = full_pool
    assert parked(dsn) == []
    got = tq.claim()
    assert got is not None and got.id == plain
    assert parked(dsn) == waiting
    assert tq.claim() is None
    assert tq.check().ok


def test_release_unparks_in_the_same_transaction_and_order_holds(full_pool, dsn: str) -> None:  # type: ignore[no-untyped-def]
    tq, running, waiting, plain = full_pool
    assert tq.claim().id == plain  # type: ignore[union-attr]
    assert parked(dsn) == waiting
    tq.complete(running)
    assert parked(dsn) == []
    assert [tq.claim().id for _ in range(1)] == waiting[:1]  # type: ignore[union-attr]
    assert tq.check().ok


def give_room(tq: TaskQueue, dsn: str, running: object, how: str) -> None:
    """Give the full pool "net" a free slot, one way or another."""
    if how == "complete":
        tq.complete(running)  # type: ignore[arg-type]
    elif how == "fail":
        tq.fail(running, "boom", retry=False)  # type: ignore[arg-type]
    elif how == "retry":
        tq.fail(running, "again", retry_in=3600)  # type: ignore[arg-type]
    elif how == "raise limit":
        tq.set_pool_limit("net", 2)
    elif how == "no limit":
        tq.set_pool_limit("net", None)
    else:
        with psycopg.connect(dsn) as conn:
            if how == "delete pool":
                conn.execute("DELETE FROM taskqueue.pools WHERE name = 'net'")
            else:  # an operator's hand-made count fix goes through the same trigger
                conn.execute("UPDATE taskqueue.pools SET running = 0 WHERE name = 'net'")


@pytest.mark.parametrize("how", ["fail", "retry", "raise limit", "no limit", "delete pool", "recount"])
def test_every_way_a_pool_gets_room_unparks(full_pool, dsn: str, how: str) -> None:  # type: ignore[no-untyped-def]
    tq, running, waiting, plain = full_pool
    assert tq.claim().id == plain  # type: ignore[union-attr]
    assert parked(dsn) == waiting
    give_room(tq, dsn, running, how)
    assert parked(dsn) == []
    got = tq.claim()
    assert got is not None and got.id == waiting[0]


def test_stats_count_parked_tasks_per_pool(full_pool, dsn: str) -> None:  # type: ignore[no-untyped-def]
    tq, running, waiting, plain = full_pool
    assert tq.stats().parked == 0
    assert tq.claim().id == plain  # type: ignore[union-attr]
    stats = tq.stats()
    assert stats.parked == len(waiting)
    assert stats.pools == (PoolStats("net", limit=1, running=1, parked=len(waiting)),)
    assert stats.by_state["queued"] == len(waiting)  # parked tasks are still queued
    tq.complete(running)
    assert tq.stats().pools == (PoolStats("net", limit=1, running=0, parked=0),)


def test_parking_rolls_back_with_a_peek(full_pool, dsn: str) -> None:  # type: ignore[no-untyped-def]
    tq, _running, _waiting, plain = full_pool
    peeked = tq.peek()
    assert peeked is not None and peeked.id == plain
    assert parked(dsn) == []


def test_cancel_of_a_parked_task(full_pool, dsn: str) -> None:  # type: ignore[no-untyped-def]
    tq, running, waiting, plain = full_pool
    assert tq.claim().id == plain  # type: ignore[union-attr]
    assert tq.cancel(waiting[0])
    assert tq.get(waiting[0]).state == "cancelled"  # type: ignore[union-attr]
    assert parked(dsn) == waiting[1:]  # a cancelled task is no longer parked
    assert tq.check().ok
    tq.complete(running)
    assert tq.claim().id == waiting[1]  # type: ignore[union-attr]


def test_a_level_of_only_full_pool_tasks_is_parked_and_then_skipped(tq: TaskQueue, dsn: str) -> None:
    tq.set_pool_limit("net", 0)
    stuck = tq.enqueue_many([{"payload": i, "pool": "net", "priority": 0} for i in range(300)])
    later = tq.enqueue("later", priority=5)
    # A claim parks the rows it walked past and the 64 right after them
    # (park_rows v3); here it walks past all 300.
    got = tq.claim()
    assert got is not None and got.id == later
    assert parked(dsn) == stuck
    assert tq.claim() is None
    tq.set_pool_limit("net", 1)
    assert parked(dsn) == []
    assert tq.claim().id == stuck[0]  # type: ignore[union-attr]


def test_a_backlog_behind_a_full_pool_is_parked_in_bulk(tq: TaskQueue, dsn: str) -> None:
    """park_rows v5: a claim that hands over all it may (500 rows) parks up to 8,192 more ahead.

    Before, each claim parked 564 rows of such a backlog, and every claim until the last passed
    all that was still unparked: 20,000 rows took 36 claims, each reading the rest.
    """
    tq.set_pool_limit("net", 0)
    stuck = tq.enqueue_many([{"payload": i, "pool": "net", "priority": 0} for i in range(20_000)])
    later = tq.enqueue_many([{"payload": i, "priority": 5} for i in range(3)])
    got = tq.claim()
    assert got is not None and got.id == later[0]
    assert parked(dsn) == stuck[: 500 + 8192]
    assert tq.claim().id == later[1]  # type: ignore[union-attr]
    assert parked(dsn) == stuck[: 2 * (500 + 8192)]
    assert tq.claim().id == later[2]  # type: ignore[union-attr]
    assert parked(dsn) == stuck
    assert tq.claim() is None
    assert tq.check().ok
    tq.set_pool_limit("net", 1)  # past 1,000 parked, one free slot puts back the one task a claim can take
    assert parked(dsn) == stuck[1:]
    assert tq.check().ok
    assert tq.claim().id == stuck[0]  # type: ignore[union-attr]
    tq.set_pool_limit("net", None)  # no limit: the whole backlog goes back, in order
    assert parked(dsn) == []
    assert [tq.claim().id for _ in range(3)] == stuck[1:4]  # type: ignore[union-attr]


def test_a_claim_over_a_list_parks_ahead_in_every_queue_it_walked(tq: TaskQueue, dsn: str) -> None:
    """park_rows v5: rows ahead of each queue the walked rows lie in; version 4 parked only the last one's."""
    tq.set_pool_limit("net", 1)
    tq.enqueue("holder", pool="net", priority=-1)
    running = tq.claim()  # "net" is full from here
    assert running is not None
    walked = tq.enqueue_many([{"payload": i, "pool": "net", "queue": q} for q in ("a", "b") for i in range(3)])
    plain = tq.enqueue("plain", queue="a")
    ahead_a = tq.enqueue_many([{"payload": i, "pool": "net", "queue": "a"} for i in range(20)])
    ahead_b = tq.enqueue_many([{"payload": i, "pool": "net", "queue": "b"} for i in range(20)])
    behind = tq.enqueue_many([{"payload": i, "pool": "net", "queue": "a", "priority": 1} for i in range(5)])
    got = tq.claim(queues=["a", "b"])
    assert got is not None and got.id == plain
    # park_rows v7: fewer than 64 rows lay ahead within priority 0, so the
    # claim read on across priorities too, and `behind` (priority 1, next in
    # claim order) went with them; version 6 parked walked + ahead only.
    assert parked(dsn) == walked + ahead_a + ahead_b + behind
    assert tq.check().ok
    tq.complete(running)
    assert parked(dsn) == []


def test_a_claim_parks_the_rows_right_after_those_it_walked_past(tq: TaskQueue, dsn: str) -> None:
    """park_rows v3: the next 64 rows of the same priority whose pool is full, and only those."""
    tq.set_pool_limit("net", 1)
    tq.set_pool_limit("open", 5)
    tq.enqueue("holder", pool="net", priority=-1)
    running = tq.claim()  # "net" is full from here
    assert running is not None
    walked = tq.enqueue_many([{"payload": i, "pool": "net"} for i in range(3)])
    plain = tq.enqueue("plain")
    ahead = tq.enqueue_many(
        [{"payload": i, "pool": "open" if i % 10 == 0 else "net"} for i in range(100)]
    )
    behind = tq.enqueue_many([{"payload": i, "pool": "net", "priority": 1} for i in range(5)])
    got = tq.claim()
    assert got is not None and got.id == plain
    # The claim's look read 8 fits (so up to 4 rows of `ahead` count as walked
    # past); from the last of those, the next 64 rows, of which those in "net".
    # None in "open" (room), none further, none of another priority.
    net = [i for n, i in enumerate(ahead) if n % 10 != 0]
    got_parked = parked(dsn)
    assert set(walked + net[: 64 - 7]) <= set(got_parked) <= set(walked + [i for i in net if i <= ahead[64 + 4]])
    assert not set(got_parked) & (set(ahead[::10]) | set(behind))
    assert tq.check().ok
    # A release puts every one of them back, in order.
    tq.complete(running)
    assert parked(dsn) == []


def test_a_descending_claim_parks_ahead_in_its_own_order(tq: TaskQueue, dsn: str) -> None:
    """Same queue and priority, later ids: next in order="max" too; then lower priorities (park_rows v7)."""
    tq.set_pool_limit("net", 1)
    running = tq.enqueue("holder", pool="net", priority=9)
    assert tq.claim(order="max").id == running  # type: ignore[union-attr]
    walked = tq.enqueue_many([{"payload": i, "pool": "net", "priority": 5} for i in range(3)])
    plain = tq.enqueue("plain", priority=5)
    ahead = tq.enqueue_many([{"payload": i, "pool": "net", "priority": 5} for i in range(10)])
    lower = tq.enqueue_many([{"payload": i, "pool": "net", "priority": 1} for i in range(5)])
    too_big = tq.enqueue_many([{"payload": i, "pool": "net", "priority": 1, "required": 10} for i in range(3)])
    got = tq.claim(order="max", available=5)
    assert got is not None and got.id == plain
    # Priority 1 comes after priority 5 in this order: with fewer than 64
    # rows ahead within priority 5, version 7 reads on into it, and parks
    # what this claim could have taken, not the tasks too big for it.
    assert parked(dsn) == walked + ahead + lower
    assert not set(parked(dsn)) & set(too_big)
    assert tq.check().ok


def parked_not_queued(dsn: str) -> list[tuple[int, str]]:
    with psycopg.connect(dsn) as conn:
        rows = conn.execute("SELECT id, state FROM taskqueue.tasks WHERE parked AND state <> 'queued' ORDER BY id").fetchall()
    return [(r[0], r[1]) for r in rows]


@pytest.mark.parametrize(
    "how",
    [{}, {"available": 5}, {"limit": 3}, {"order": "max"}, {"order": "max", "available": 5}, {"order": "max", "limit": 3}],
    ids=["asc", "asc-fit", "asc-many", "max", "max-fit", "max-many"],
)
def test_a_task_a_claim_takes_is_never_parked(tq: TaskQueue, dsn: str, how: dict[str, object]) -> None:
    """claim_tasks v24: a claim starts what it takes before it parks.

    The claim walks past rows of a full pool, then takes T, whose pool it fills;
    T comes right after the walked rows, where park_rows parks ahead. Parked
    first (v23, order="max"), T ran parked and came back from a failure parked,
    out of the claim index while its pool had room.
    """
    tq.set_pool_limit("full", 1)
    tq.set_pool_limit("x", 1)
    tq.enqueue("holder", pool="full", priority=-1)
    assert tq.claim() is not None  # "full" is full from here
    tq.enqueue_many([{"payload": i, "pool": "full"} for i in range(3)])
    target = tq.enqueue("T", pool="x")
    others = tq.enqueue_many([{"payload": i, "pool": "x"} for i in range(3)])
    kwargs = dict(how)
    limit = kwargs.pop("limit", None)
    got = tq.claim_many(limit=limit, **kwargs) if limit else [tq.claim(**kwargs)]  # type: ignore[arg-type]
    assert [t.id for t in got if t is not None] == [target]
    assert parked_not_queued(dsn) == []
    assert set(parked(dsn)) >= set(others)  # "x" is full now: its other rows were parked
    assert tq.check().ok
    tq.fail(got[0], "again", retry_in=0)  # back to queued, its slot freed
    assert not set(parked(dsn)) & {*others, target}
    again = tq.claim(**kwargs)  # type: ignore[arg-type]
    assert again is not None and again.id == target
    assert tq.check().ok


def test_random_claims_never_leave_a_parked_task_that_is_not_queued(tq: TaskQueue, dsn: str) -> None:
    """Random claims (either order, with and without a fit, a list, a batch) over pooled tasks, with
    completions and failures between them: after every claim only queued tasks are parked, and the
    checker finds nothing. On claim_tasks v23 this seed broke it in both orders."""
    rng = random.Random(20261127)
    pools = ["p0", "p1", "p2", "p3"]
    for pool in pools:
        tq.set_pool_limit(pool, rng.randint(1, 3))
    tq.enqueue_many(
        {"payload": i, "pool": rng.choice([*pools, None]), "priority": rng.randint(0, 2),
         "required": rng.randint(1, 4), "queue": rng.choice(["a", "b"])}
        for i in range(300)
    )
    held: list[Any] = []
    for _ in range(150):
        kwargs: dict[str, Any] = {}
        if rng.random() < 0.5:
            kwargs["order"] = "max"
        if rng.random() < 0.5:
            kwargs["available"] = rng.randint(1, 8)
        if rng.random() < 0.3:
            kwargs["queues"] = rng.choice([["a"], ["b"], ["a", "b"]])
        limit = rng.choice([None, None, 2, 4])
        got = tq.claim_many(limit=limit, **kwargs) if limit else [tq.claim(**kwargs)]
        held += [t for t in got if t is not None]
        assert parked_not_queued(dsn) == [], kwargs
        if held and rng.random() < 0.5:
            task = held.pop(rng.randrange(len(held)))
            if rng.random() < 0.5:
                tq.complete(task)
            else:
                tq.fail(task, "again", retry_in=0)
    assert tq.check().ok


def test_a_parked_task_that_is_not_queued_is_reported_and_repaired(full_pool, dsn: str) -> None:  # type: ignore[no-untyped-def]
    tq, running, _waiting, _plain = full_pool
    with psycopg.connect(dsn) as conn:  # what claim_tasks v23 could leave behind
        conn.execute("UPDATE taskqueue.tasks SET parked = true WHERE id = %s", (running.id,))
    report = tq.check()
    assert {v.check for v in report.violations} == {"parked_not_queued"}
    with psycopg.connect(dsn) as conn:
        rows = conn.execute("SELECT check_name, subject FROM taskqueue.invariant_violations").fetchall()
    assert rows == [("parked_not_queued", f"task {running.id}")]
    fixed = tq.check(repair=True)
    assert fixed.ok and [(r.action, r.subject) for r in fixed.repaired] == [("unpark_task", f"task {running.id}")]
    assert parked_not_queued(dsn) == []


def _freed_at(dsn: str, pool: str) -> object:
    with psycopg.connect(dsn) as conn:
        row = conn.execute("SELECT freed_at FROM taskqueue.pools WHERE name = %s", (pool,)).fetchone()
    assert row is not None
    return row[0]


def test_a_pool_that_just_had_room_is_walked_past_not_parked(tq: TaskQueue, dsn: str) -> None:
    """park_rows v4: a pool freed in the last second fills and frees again soon; its tasks stay unparked.

    Parking them would only have the next release unpark them again (one big pool of limit 2
    ran at 0.40 of a naive loop that way). A second after its last free slot it is parked as before.
    """
    tq.set_pool_limit("net", 1)
    first = tq.enqueue("first", pool="net", priority=-1)
    assert _freed_at(dsn, "net") is None
    running = tq.claim()
    assert running is not None and running.id == first
    tq.complete(running)  # full -> room: the release marks the pool freed
    assert _freed_at(dsn, "net") is not None
    waiting = tq.enqueue_many([{"payload": i, "pool": "net"} for i in range(20)])
    plain = tq.enqueue("plain")
    holder = tq.claim()
    assert holder is not None and holder.id == waiting[0]  # "net" is full again
    got = tq.claim()
    assert got is not None and got.id == plain  # walked past the 19 others of "net"
    assert parked(dsn) == []
    assert tq.check().ok
    with psycopg.connect(dsn) as conn:  # a second later, as far as the pool knows
        conn.execute("UPDATE taskqueue.pools SET freed_at = freed_at - interval '2 seconds' WHERE name = 'net'")
    tq.enqueue("plain again")
    assert tq.claim().payload == "plain again"  # type: ignore[union-attr]
    assert parked(dsn) == waiting[1:]
    tq.complete(holder)  # and a release unparks them, as before
    assert parked(dsn) == []
    assert tq.claim().id == waiting[1]  # type: ignore[union-attr]


@pytest.mark.parametrize("how", ["complete", "raise limit", "no limit", "recount"])
def test_every_way_a_full_pool_gets_room_marks_it_freed(full_pool, dsn: str, how: str) -> None:  # type: ignore[no-untyped-def]
    tq, running, _waiting, _plain = full_pool
    assert _freed_at(dsn, "net") is None
    give_room(tq, dsn, running, how)
    with psycopg.connect(dsn) as conn:
        row = conn.execute("SELECT freed_at BETWEEN now() - interval '1 minute' AND now()"
                           " FROM taskqueue.pools WHERE name = 'net'").fetchone()
    assert row == (True,)  # set just now, by the database's clock


def test_filling_a_pool_does_not_mark_it_freed(tq: TaskQueue, dsn: str) -> None:
    tq.set_pool_limit("net", 2)
    tq.enqueue_many([{"payload": i, "pool": "net"} for i in range(3)])
    a, b = tq.claim(), tq.claim()
    assert a is not None and b is not None
    tq.set_pool_limit("net", 1)  # lowered below running: still full
    tq.complete(a)  # 2 -> 1 of limit 1: still full, not freed
    assert _freed_at(dsn, "net") is None
    tq.complete(b)
    assert _freed_at(dsn, "net") is not None


def test_stranded_parked_task_is_reported_and_repaired(full_pool, dsn: str) -> None:  # type: ignore[no-untyped-def]
    tq, running, waiting, plain = full_pool
    assert tq.claim().id == plain  # type: ignore[union-attr]
    with psycopg.connect(dsn) as conn:  # free the slot behind the trigger's back
        conn.execute("ALTER TABLE taskqueue.pools DISABLE TRIGGER on_pool_room")
        conn.execute("UPDATE taskqueue.pools SET running_limit = 5 WHERE name = 'net'")
        conn.execute("ALTER TABLE taskqueue.pools ENABLE TRIGGER on_pool_room")
    report = tq.check()
    assert not report.ok
    assert {v.check for v in report.violations} == {"parked_in_open_pool"}
    with psycopg.connect(dsn) as conn:
        rows = conn.execute("SELECT subject FROM taskqueue.invariant_violations").fetchall()
    assert sorted(r[0] for r in rows) == sorted(f"task {i}" for i in waiting)
    fixed = tq.check(repair=True)
    assert fixed.ok and {r.action for r in fixed.repaired} == {"unpark_task"}
    assert parked(dsn) == []
    assert tq.claim().id == waiting[0]  # type: ignore[union-attr]


def _buffers(conn: psycopg.Connection, sql: str, params: tuple[object, ...] = ()) -> tuple[int, int]:
    """(buffers, rows) of one statement, rolled back. Run twice on one connection: the first call plans."""
    row = conn.execute(f"EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) {sql}", params).fetchone()
    conn.rollback()
    assert row is not None
    plan = row[0][0]["Plan"]
    return int(plan.get("Shared Hit Blocks", 0)) + int(plan.get("Shared Read Blocks", 0)), int(plan["Actual Rows"])


def _claim_buffers(conn: psycopg.Connection) -> int:
    """Buffers of one claim, rolled back."""
    buffers, rows = _buffers(conn, "SELECT * FROM claim_tasks(NULL, 1, NULL, 'plan-test', 60, false)")
    assert rows == 1
    return buffers


def test_parked_tasks_are_not_walked(tq: TaskQueue, dsn: str) -> None:
    """Buffer counts, which are deterministic where time is not: parked rows cost the claim nothing."""
    tq.set_pool_limit("net", 0)
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(
            "INSERT INTO taskqueue.tasks (queue, payload, priority, required, pool, state, max_attempts)"
            " SELECT 'default', '{}', 0, 0, 'net', 'queued', 3 FROM generate_series(1, 5000)"
        )
        conn.execute(
            "INSERT INTO taskqueue.tasks (queue, payload, priority, required, state, max_attempts)"
            " SELECT 'default', '{}', 0, 0, 'queued', 3 FROM generate_series(1, 20)"
        )
        conn.execute("VACUUM ANALYZE taskqueue.tasks")
    with psycopg.connect(dsn) as conn:
        conn.execute("SELECT set_config('search_path', 'taskqueue', false)")
        conn.commit()
        _claim_buffers(conn)
        walking = _claim_buffers(conn)  # walks all 5,000 (and parks 500, rolled back)
        while len(parked(dsn)) < 5000:
            assert tq.claim() is not None
        with psycopg.connect(dsn, autocommit=True) as other:
            other.execute("VACUUM ANALYZE taskqueue.tasks")
        _claim_buffers(conn)
        after = _claim_buffers(conn)
    assert after < 100, f"a claim past 5,000 parked tasks touched {after} buffers"
    assert walking > 10 * after, (walking, after)


def _park_buffers(conn: psycopg.Connection, ids: list[int]) -> int:
    """Buffers of one park_rows call, rolled back."""
    return _buffers(conn, "SELECT park_rows(%s, '{}')", (ids,))[0]


def test_parking_reads_the_pools_it_names_whatever_the_pools_table_holds(tq: TaskQueue, dsn: str) -> None:
    """Pools are looked up by name (park_rows v3): 50,000 idle pools cost a park nothing more."""
    tq.set_pool_limit("net", 0)
    ids = tq.enqueue_many([{"payload": i, "pool": "net"} for i in range(8)])
    with psycopg.connect(dsn) as conn:
        conn.execute("SELECT set_config('search_path', 'taskqueue', false)")
        conn.commit()
        _park_buffers(conn, ids)
        few = _park_buffers(conn, ids)
        with psycopg.connect(dsn, autocommit=True) as other:
            other.execute("INSERT INTO taskqueue.pools (name) SELECT 'idle-' || g FROM generate_series(1, 50000) g")
            other.execute("VACUUM ANALYZE taskqueue.pools")
        _park_buffers(conn, ids)
        many = _park_buffers(conn, ids)
    assert parked(dsn) == []  # rolled back
    assert many <= few + 4, f"park_rows read {few} buffers over 1 pool and {many} over 50,001"
