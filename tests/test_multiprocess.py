"""Concurrency claims, proven with several processes on one database."""

from __future__ import annotations

import multiprocessing as mp
import random
from typing import Any

import psycopg
import pytest

from taskqueue import Order, TaskQueue

PROCESSES = 4
pytestmark = pytest.mark.slow


def _claim_until_empty(
    dsn: str, start: Any, out: Any, index: int, available: int, limit: int, order: Order = "min"
) -> None:
    ids: list[int] = []
    # Half the processes claim one at a time and hold their tasks; the others
    # claim batches and complete them.
    single = index % 2 == 1
    with TaskQueue(dsn, pool_size=1, max_overflow=0) as tq:
        start.wait(60)
        empty_rounds = 0
        while empty_rounds < 3:  # a round can come back empty while others hold locks
            got = [tq.claim(available=available, order=order)] if single else tq.claim_many(
                available=available, limit=limit, order=order)
            got = [t for t in got if t is not None]
            if not got:
                empty_rounds += 1
                continue
            empty_rounds = 0
            for task in got:
                ids.append(task.id)
                if not single:
                    tq.complete(task)
    out.put(ids)


def _hold_pool_claims(dsn: str, start: Any, out: Any, index: int, available: int | None, order: str) -> None:
    held: list[tuple[int, str]] = []
    with TaskQueue(dsn, pool_size=1, max_overflow=0) as tq:
        start.wait(60)
        misses = 0
        while misses < 3:
            task = tq.claim(available=available, order=order)  # type: ignore[arg-type]
            if task is None:
                misses += 1
                continue
            misses = 0
            held.append((task.id, task.pool))  # type: ignore[arg-type]
    out.put(held)


def _run(target: Any, *args: Any) -> list[Any]:
    ctx = mp.get_context("spawn")
    start = ctx.Event()
    out = ctx.Queue()
    procs = [ctx.Process(target=target, args=(args[0], start, out, i, *args[1:])) for i in range(PROCESSES)]
    for p in procs:
        p.start()
    start.set()
    results = [out.get(timeout=120) for _ in procs]
    for p in procs:
        p.join(60)
    assert [p.exitcode for p in procs] == [0] * PROCESSES
    return results


def _bulk_insert(dsn: str, sql: str) -> None:
    with psycopg.connect(dsn) as conn:
        conn.execute(sql)


def test_four_processes_never_claim_an_id_twice(tq: TaskQueue, dsn: str) -> None:
    total = 3000
    _bulk_insert(
        dsn,
        "INSERT INTO taskqueue.tasks (queue, payload, priority, required, state, max_attempts) "
        f"SELECT 'default', jsonb_build_object('n', g), g % 5, g % 4, 'queued', 3 FROM generate_series(1, {total}) g",
    )
    results = _run(_claim_until_empty, dsn, 6, 8)
    claimed = [tid for ids in results for tid in ids]
    assert len(claimed) == total
    assert len(set(claimed)) == total  # no id claimed twice
    assert all(len(ids) > 0 for ids in results)  # every process took part
    with psycopg.connect(dsn) as conn:
        states = dict(conn.execute("SELECT state, count(*) FROM taskqueue.tasks GROUP BY 1").fetchall())
        attempts = conn.execute("SELECT max(attempts) FROM taskqueue.tasks").fetchone()[0]  # type: ignore[index]
    assert sum(states.values()) == total and set(states) <= {"done", "running"}
    assert 0 < states.get("running", 0) < total  # both kinds of claimer took part
    assert attempts == 1


@pytest.mark.parametrize(("available", "order"), [(None, "min"), (4, "min"), (4, "max")])
def test_four_processes_fill_pools_exactly_to_their_limits(
    tq: TaskQueue, dsn: str, available: int | None, order: str
) -> None:
    """Every claim kind that takes a pool's slot: step 0 (no amount), and
    step S in both orders (less than 16 available, sizes 1 to 3, priorities
    mixed so a pooled fit comes first or behind full pools' fits)."""
    limits = {f"10.0.{i}.0/24": 1 + i % 4 for i in range(12)}
    for name, limit in limits.items():
        tq.set_pool_limit(name, limit)
    specs = [{"payload": {"n": n}, "pool": name, "priority": (n * 7) % 5, "required": 1 + n % 3}
             for name in limits for n in range(15)]
    specs += [{"payload": {"free": n}, "pool": "unlimited", "priority": n % 5, "required": 1 + n % 3}
              for n in range(20)]
    tq.enqueue_many(specs)
    results = _run(_hold_pool_claims, dsn, available, order)
    held = [item for part in results for item in part]
    per_pool: dict[str, int] = {}
    for _tid, pool in held:
        per_pool[pool] = per_pool.get(pool, 0) + 1
    assert len({tid for tid, _ in held}) == len(held)
    assert per_pool == {**limits, "unlimited": 20}  # per-pool totals equal the limits exactly
    reported = {p.name: (p.limit, p.running) for p in tq.pools()}
    assert reported == {**{n: (lim, lim) for n, lim in limits.items()}, "unlimited": (None, 20)}
    with psycopg.connect(dsn) as conn:
        actual = dict(
            conn.execute(
                "SELECT pool, count(*) FROM taskqueue.tasks WHERE state = 'running' GROUP BY pool"
            ).fetchall()
        )
    assert actual == per_pool


def _claim_and_complete(dsn: str, start: Any, out: Any, index: int) -> None:
    ids: list[int] = []
    with TaskQueue(dsn, pool_size=1, max_overflow=0) as tq:
        start.wait(60)
        empty_rounds = 0
        while empty_rounds < 3:
            task = tq.claim(worker=f"p{index}")
            if task is None:
                empty_rounds += 1
                continue
            empty_rounds = 0
            ids.append(task.id)
            tq.complete(task)
    out.put(ids)


def parked_count(dsn: str) -> int:
    with psycopg.connect(dsn) as conn:
        row = conn.execute("SELECT count(*) FROM taskqueue.tasks WHERE parked AND state = 'queued'").fetchone()
    assert row is not None
    return int(row[0])


def test_four_processes_park_and_unpark_without_losing_a_task(tq: TaskQueue, dsn: str) -> None:
    """Pools that flicker between full and free, and pools held full until the end."""
    flicker = [f"10.1.{i}.0/24" for i in range(8)]
    blocked = [f"10.2.{i}.0/24" for i in range(4)]
    for name in (*flicker, *blocked):
        tq.set_pool_limit(name, 1)
    tq.enqueue_many([{"payload": {"hold": name}, "pool": name, "priority": -1} for name in blocked])
    holders = [tq.claim() for _ in blocked]
    assert all(h is not None and h.pool in blocked for h in holders)
    specs: list[dict[str, Any]] = []
    for n in range(150):  # interleaved in id order, as a scanner would enqueue them
        specs += [{"payload": {"n": n}, "pool": name} for name in (*flicker, *blocked)]
        specs.append({"payload": {"free": n}})
    ids = tq.enqueue_many(specs)
    blocked_ids = {tid for tid, spec in zip(ids, specs) if spec.get("pool") in blocked}

    first = [tid for part in _run(_claim_and_complete, dsn) for tid in part]
    assert len(first) == len(set(first)) == len(ids) - len(blocked_ids)
    assert not blocked_ids & set(first)
    assert tq.claim() is None  # finishes parking whatever the processes skipped as busy
    assert parked_count(dsn) == len(blocked_ids)
    assert tq.check().ok

    for holder in holders:  # each completion frees its pool and unparks its tasks
        tq.complete(holder)  # type: ignore[arg-type]
    assert parked_count(dsn) == 0

    second = [tid for part in _run(_claim_and_complete, dsn) for tid in part]
    assert sorted(second) == sorted(blocked_ids)
    with psycopg.connect(dsn) as conn:
        states = dict(conn.execute("SELECT state, count(*) FROM taskqueue.tasks GROUP BY 1").fetchall())
        attempts = conn.execute("SELECT max(attempts) FROM taskqueue.tasks").fetchone()[0]  # type: ignore[index]
    assert states == {"done": len(ids) + len(holders)}
    assert attempts == 1  # nothing ran twice
    report = tq.check()
    assert report.ok, report


def test_four_processes_park_a_long_backlog_in_bulk_without_losing_a_task(tq: TaskQueue, dsn: str) -> None:
    """park_rows v5: claims that pass 500 rows of full pools park thousands ahead, four at once.

    12,000 tasks of two full pools, in two queues, wait ahead of the free work. Parking in bulk
    contends for the same pools' rows (SKIP LOCKED), and a claim that finds them locked parks
    nothing and goes on: no free task may be missed or taken twice, no blocked one taken.
    """
    blocked = ["10.3.0.0/24", "10.3.1.0/24"]
    for name in blocked:
        tq.set_pool_limit(name, 0)
    specs = [{"payload": {"n": n}, "pool": blocked[n % 2], "queue": "ab"[n // 2 % 2], "priority": 0}
             for n in range(12_000)]
    specs += [{"payload": {"free": n}, "queue": "ab"[n % 2], "priority": 1} for n in range(400)]
    ids = tq.enqueue_many(specs)
    blocked_ids = set(ids[:12_000])

    first = [tid for part in _run(_claim_and_complete, dsn) for tid in part]
    assert sorted(first) == sorted(ids[12_000:])  # every free task once, no blocked one
    assert tq.claim() is None
    assert parked_count(dsn) == len(blocked_ids)  # the backlog is parked, all of it
    assert tq.check().ok

    for name in blocked:  # a limit of 1 each: one slot, so (past 1,000 parked) the first of each queue goes back
        tq.set_pool_limit(name, 1)
    assert parked_count(dsn) == len(blocked_ids) - 2 * len(blocked)
    assert tq.check().ok
    for name in blocked:  # no limit: the whole backlog goes back
        tq.set_pool_limit(name, None)
    assert parked_count(dsn) == 0
    assert tq.check().ok


def _claim_fits_and_complete(dsn: str, start: Any, out: Any, index: int, available: int) -> None:
    taken: list[tuple[int, int]] = []
    with TaskQueue(dsn, pool_size=1, max_overflow=0) as tq:
        start.wait(60)
        empty_rounds = 0
        while empty_rounds < 3:
            task = tq.claim(available=available, worker=f"p{index}")
            if task is None:
                empty_rounds += 1
                continue
            empty_rounds = 0
            taken.append((task.id, task.required))
            tq.complete(task)
    out.put(taken)


@pytest.mark.parametrize("queues", [1, 3])
def test_four_processes_race_for_the_fits_behind_a_pile_of_tasks_too_big(
    tq: TaskQueue, dsn: str, queues: int
) -> None:
    """A pile of tasks too big in front, longer than the look's budget, then
    sizes over 1..1M of which half fit: every process is sent by the buckets
    to the same first fit, and each must take a different task (the look from
    that task, claim_tasks v10). Every task that fits is taken exactly once,
    and nothing too big."""
    available = 500_000
    _bulk_insert(
        dsn,
        "INSERT INTO taskqueue.tasks (queue, payload, priority, required, state, max_attempts) "
        f"SELECT 'q' || g % {queues}, '{{}}'::jsonb, g % 2, CASE WHEN g <= 1500 THEN 500001 + g % 1000 "
        "ELSE 1 + (g * 7919) % 1000000 END, 'queued', 3 FROM generate_series(1, 4000) g",
    )
    with psycopg.connect(dsn) as conn:
        fits = {r[0] for r in conn.execute(
            "SELECT id FROM taskqueue.tasks WHERE required <= %s", (available,)).fetchall()}
    results = _run(_claim_fits_and_complete, dsn, available)
    taken = [item for part in results for item in part]
    assert all(required <= available for _, required in taken)
    ids = [tid for tid, _ in taken]
    assert len(ids) == len(set(ids))
    assert set(ids) == fits
    assert all(len(part) > 0 for part in results)


def _empty_claims(dsn: str, start: Any, out: Any, index: int, available: int, claims: int) -> None:
    taken: list[int] = []
    with TaskQueue(dsn, pool_size=1, max_overflow=0) as tq:
        start.wait(60)
        for _ in range(claims):
            task = tq.claim(available=available, worker=f"e{index}")
            if task is not None:
                taken.append(task.id)
    out.put(taken)


def test_four_processes_make_empty_claims_that_park_in_bulk_at_once(tq: TaskQueue, dsn: str) -> None:
    """Migration 0046: claims that find every fit in a full pool park those pools' fits, four processes at once.

    Every task its own priority, so a claim parks nothing ahead of what it passed: only the bulk read of
    an empty claim parks them. The claims lock the same pools (each skips those another holds), none may
    take a task, wait on another or park a task that does not fit, and the fits go back whole when the
    pools get room.
    """
    full = [f"10.46.{i}.0/24" for i in range(12)]
    for name in full:
        tq.set_pool_limit(name, 0)
    fits = tq.enqueue_many([{"payload": {"n": n}, "pool": full[n % 12], "priority": 1_000 + n,
                             "required": 1 + n % 4} for n in range(6_000)])
    too_big = tq.enqueue_many([{"payload": {"big": n}, "priority": n, "required": 50} for n in range(200)])
    taken = [tid for part in _run(_empty_claims, dsn, 4, 5) for tid in part]
    assert taken == []
    assert tq.claim(available=4) is None
    with psycopg.connect(dsn) as conn:
        rows = conn.execute("SELECT id FROM taskqueue.tasks WHERE parked AND state = 'queued' ORDER BY id").fetchall()
    assert [r[0] for r in rows] == fits, "every fit parked, and no task that does not fit"
    assert tq.check().ok
    for name in full:
        tq.set_pool_limit(name, None)
    assert parked_count(dsn) == 0
    drained = [tid for part in _run(_claim_and_complete, dsn) for tid in part]
    assert sorted(drained) == sorted(fits + too_big)
    assert tq.check().ok


def test_four_processes_drain_parked_backlogs_through_staircase_releases(tq: TaskQueue, dsn: str) -> None:
    """Migration 0045: past 1,000 parked tasks a release puts back only the staircase, four processes at once.

    Two pools of limit 1 with 1,500 parked tasks each (sizes and priorities in random order, two queues)
    are drained by four processes that claim and complete: each release puts back a few tasks, the
    claims race for them, and none may be lost, taken twice or left parked, with the checker clean.
    """
    rng = random.Random(45)
    blocked = ["10.4.0.0/24", "10.4.1.0/24"]
    for name in blocked:
        tq.set_pool_limit(name, 0)
    specs = [{"payload": {"n": n}, "pool": blocked[n % 2], "queue": "ab"[n // 2 % 2],
              "priority": rng.randint(0, 3), "required": rng.randint(0, 50)} for n in range(3_000)]
    ids = tq.enqueue_many(specs)
    free = tq.enqueue_many([{"payload": {"free": n}, "queue": "ab"[n % 2], "priority": 9} for n in range(20)])
    first = [tid for part in _run(_claim_and_complete, dsn) for tid in part]
    assert sorted(first) == sorted(free)
    # A claim that finds a pool locked by another's parking passes its rows and parks none (a later
    # claim does): claims from here finish what the racing processes skipped, a few at most.
    for _ in range(10):
        if parked_count(dsn) == len(ids):
            break
        assert tq.claim() is None
    assert parked_count(dsn) == len(ids)
    for name in blocked:
        tq.set_pool_limit(name, 1)
    assert 4 <= len(ids) - parked_count(dsn) < 100  # the staircases of two pools and two queues, not the backlog
    assert tq.check().ok

    second = [tid for part in _run(_claim_and_complete, dsn) for tid in part]
    assert sorted(second) == sorted(ids)
    assert parked_count(dsn) == 0
    with psycopg.connect(dsn) as conn:
        attempts = conn.execute("SELECT max(attempts) FROM taskqueue.tasks").fetchone()[0]  # type: ignore[index]
    assert attempts == 1
    assert tq.check().ok


@pytest.mark.parametrize("order", ["min", "max"])
def test_four_processes_claim_past_fits_another_transaction_holds(tq: TaskQueue, dsn: str, order: Order) -> None:
    """Migration 0047: claims that keep meeting fits held by another transaction walk past them, four at once.

    Every third fit is held FOR UPDATE by an open transaction, so each claim passes all the held ones
    ahead of the fits still free (step K, from the 8th lost). The four processes, two claiming one at a
    time and two in batches, must take every free fit once and no held one; once the transaction ends,
    the held ones are drained too, with the checker clean. In ``max`` order the priorities are negated,
    so the held fits still come first.
    """
    sign = -1 if order == "max" else 1
    specs = []
    for n in range(3_000):
        specs.append({"payload": {"n": n}, "priority": sign * 2 * n, "required": 1 + n % 4})
        specs.append({"payload": {"big": n}, "priority": sign * (2 * n + 1), "required": 60})
    ids = tq.enqueue_many(specs)
    fits, big = ids[0::2], ids[1::2]
    held = fits[::3]
    with psycopg.connect(dsn) as holder:
        got = holder.execute("SELECT id FROM taskqueue.tasks WHERE id = ANY (%s) FOR UPDATE", (held,)).fetchall()
        assert len(got) == len(held)
        taken = [tid for part in _run(_claim_until_empty, dsn, 4, 10, order) for tid in part]
        holder.rollback()
    assert len(taken) == len(set(taken)), "a task taken twice"
    assert sorted(taken) == sorted(set(fits) - set(held))
    assert tq.check().ok
    rest = [tid for part in _run(_claim_until_empty, dsn, 4, 10, order) for tid in part]
    assert sorted(rest) == sorted(held)
    assert tq.claim(available=4) is None
    with psycopg.connect(dsn) as conn:
        queued = conn.execute("SELECT id FROM taskqueue.tasks WHERE state = 'queued' ORDER BY id").fetchall()
    assert [r[0] for r in queued] == sorted(big), "every task too big for 4 still queued, and nothing else"
    assert tq.check().ok
