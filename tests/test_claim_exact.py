"""The bounded claim returns exactly what the plain rule says, on random data of every shape.

A reference in Python walks the queued tasks in claim order and takes each
one that fits what is left and whose pool has room, as the contract says. The
database's claim must agree on every call: single claims and packed batches,
both orders, several queues, full pools, required values across many buckets
and at their edges, locked rows. ``peek`` must agree too, and write nothing.
"""

from __future__ import annotations

import os
import random
import threading
from collections.abc import Callable
from dataclasses import dataclass

import psycopg
import pytest

from taskqueue import TaskQueue

QUEUES = ("a", "b", "c")
SEEDS = int(os.environ.get("TQ_EXACT_SEEDS", "6"))  # raise it to hunt for a counterexample


@dataclass
class Row:
    id: int
    queue: str
    priority: int
    required: int
    pool: str | None


def required_values(rng: random.Random, kind: str) -> int:
    if kind == "small":
        return rng.randint(0, 20)
    if kind == "mb":
        return rng.randint(1, 1_000_000)
    if kind == "edges":  # bucket edges: powers of two and their neighbours
        return max(0, 2 ** rng.randint(0, 30) + rng.choice((-1, 0, 1)))
    return rng.choice((1, 1000, 1_000_000, 2**30))  # a few huge levels


def snapshot(dsn: str) -> tuple[list[Row], dict[str, tuple[int | None, int]]]:
    with psycopg.connect(dsn) as conn:
        rows = conn.execute(
            "SELECT id, queue, priority, required, pool FROM taskqueue.tasks WHERE state = 'queued'"
        ).fetchall()
        pools = conn.execute("SELECT name, running_limit, running FROM taskqueue.pools").fetchall()
    return [Row(*r) for r in rows], {name: (lim, run) for name, lim, run in pools}


def reference(
    rows: list[Row], pools: dict[str, tuple[int | None, int]], available: int | None, limit: int,
    queues: list[str] | None, order: str, skip: set[int],
) -> list[int]:
    """The contract, stated plainly."""
    if order == "max":
        ordered = sorted(rows, key=lambda r: (-r.priority, r.id))
    else:
        ordered = sorted(rows, key=lambda r: (r.priority, r.id))
    left = available
    running = {name: run for name, (_, run) in pools.items()}
    taken: list[int] = []
    for r in ordered:
        if len(taken) >= limit:
            break
        if r.id in skip or (queues is not None and r.queue not in queues):
            continue
        if left is not None and r.required > left:
            continue
        if r.pool is not None:
            lim = pools.get(r.pool, (None, 0))[0]
            if lim is not None and running.get(r.pool, 0) >= lim:
                continue
            running[r.pool] = running.get(r.pool, 0) + 1
        taken.append(r.id)
        if left is not None:
            left -= r.required
    return taken


def fill(tq: TaskQueue, rng: random.Random, n: int) -> None:
    kind = rng.choice(("small", "mb", "edges", "levels"))
    wide = rng.random() < 0.5
    specs = []
    for _ in range(n):
        pool = rng.choice((None, None, "p0", "p1", "p2", "p3"))
        specs.append({
            "payload": {},
            "queue": rng.choice(QUEUES),
            "priority": rng.randint(-10**6, 10**6) if wide else rng.randint(0, 5),
            "required": required_values(rng, kind),
            "pool": pool,
        })
    tq.enqueue_many(specs)
    for i in range(4):
        tq.set_pool_limit(f"p{i}", rng.choice((None, 0, 1, 3)))


def pick_available(rng: random.Random, rows: list[Row]) -> int | None:
    if rng.random() < 0.1 or not rows:
        return None
    r = rng.choice(rows).required
    return max(0, r + rng.choice((-1, 0, 0, 1, r // 3)))


@pytest.mark.parametrize("seed", range(SEEDS))
def test_claims_match_the_reference(tq: TaskQueue, dsn: str, seed: int) -> None:
    rng = random.Random(seed)
    fill(tq, rng, 400)
    held = []
    for step in range(40):
        rows, pools = snapshot(dsn)
        if not rows:
            break
        available = pick_available(rng, rows)
        limit = rng.choice((1, 1, 3, 50))
        queues = rng.choice((None, ["a"], ["b", "c"]))
        order = rng.choice(("min", "max"))
        expected = reference(rows, pools, available, limit, queues, order, set())
        assert [t.id for t in _peek(tq, available, queues, order)] == expected[:1], f"step {step}: peek"
        got = tq.claim_many(available=available, limit=limit, queues=queues, order=order)  # type: ignore[arg-type]
        assert [t.id for t in got] == expected, f"step {step}: available={available} limit={limit} {order}"
        held.extend(got)
        rng.shuffle(held)
        while held and rng.random() < 0.6:  # free pool slots now and then
            tq.complete(held.pop())
    assert tq.check().ok


def _peek(tq: TaskQueue, available: int | None, queues: list[str] | None, order: str) -> list[object]:
    task = tq.peek(available=available, queues=queues, order=order)  # type: ignore[arg-type]
    return [] if task is None else [task]


def test_locked_rows_are_skipped_exactly(tq: TaskQueue, dsn: str) -> None:
    rng = random.Random(11)
    fill(tq, rng, 300)
    rows, pools = snapshot(dsn)
    locked = {r.id for r in rows if rng.random() < 0.3}
    with psycopg.connect(dsn) as other:
        other.execute("SELECT id FROM taskqueue.tasks WHERE id = ANY (%s) FOR UPDATE", (list(locked),))
        for available in (None, 0, 7, 1000, 2**20):
            expected = reference(rows, pools, available, 5, None, "min", locked)
            got = tq.claim_many(available=available, limit=5)
            assert [t.id for t in got] == expected
            for t in got:
                tq.release(t)
            rows, pools = snapshot(dsn)


def test_peek_writes_nothing_and_waits_on_no_lock(tq: TaskQueue, dsn: str) -> None:
    head = tq.enqueue("head", pool="p", required=3)
    tq.set_pool_limit("p", 2)
    with psycopg.connect(dsn) as conn:  # due, but no claim has promoted it yet
        due = conn.execute(
            "INSERT INTO taskqueue.tasks (queue, payload, priority, required, state, max_attempts, run_at) "
            "VALUES ('default', '{}', 5, 1, 'scheduled', 1, now() - interval '1 second') RETURNING id"
        ).fetchone()[0]  # type: ignore[index]
    with psycopg.connect(dsn) as other:
        # Another transaction holds the head task and its pool row.
        other.execute("SELECT 1 FROM taskqueue.tasks WHERE id = %s FOR UPDATE", (head,))
        other.execute("SELECT 1 FROM taskqueue.pools WHERE name = 'p' FOR UPDATE")
        before = _counters(dsn)
        result: list[object] = []
        worker = threading.Thread(target=lambda: result.append(tq.peek(available=5)))
        worker.start()
        worker.join(timeout=30)
        assert not worker.is_alive(), "peek waited on a lock"
        assert _counters(dsn) == before
    assert result and getattr(result[0], "id", None) == head
    assert tq.peek(available=2).id == due  # type: ignore[union-attr]
    assert tq.get(due).state == "queued"  # type: ignore[union-attr]  # get() reports due as claimable
    with psycopg.connect(dsn) as conn:
        assert conn.execute("SELECT state FROM taskqueue.tasks WHERE id = %s", (due,)).fetchone() == ("scheduled",)


def _counters(dsn: str) -> tuple[int, ...]:
    with psycopg.connect(dsn) as conn:
        conn.execute("SELECT pg_stat_force_next_flush()")
        rows = conn.execute(
            "SELECT id, state, parked, attempts FROM taskqueue.tasks ORDER BY id"
        ).fetchall()
    return tuple(x for r in rows for x in (r[0], hash(r[1]), int(r[2]), r[3]))


@pytest.mark.parametrize("seed", range(3))
def test_fine_boundary_matches_the_reference(tq: TaskQueue, dsn: str, seed: int) -> None:
    """Sizes that fall as ids grow, packed around what is available: the search
    gets past the window and the boundary bucket's first walk into its fine
    buckets (required_fine), in both orders, with pools."""
    rng = random.Random(100 + seed)
    n = 3000
    centre = rng.choice((600, 5_000, 500_000, 2**30))
    spread = max(8, centre // 50)
    specs = []
    for i in range(n):
        falling = centre + spread - (2 * spread * i) // n  # big first, then smaller
        specs.append({
            "payload": {},
            "queue": "a",
            "priority": rng.choice((0, 0, 0, 1)),
            "required": max(0, falling + rng.randint(-3, 3)),
            "pool": rng.choice((None, None, None, "p0", "p1")),
        })
    tq.enqueue_many(specs)
    tq.set_pool_limit("p0", 0)
    tq.set_pool_limit("p1", 50)
    held = []
    for step in range(30):
        rows, pools = snapshot(dsn)
        available = centre + rng.randint(-spread, spread) // rng.choice((1, 4, 16))
        limit = rng.choice((1, 1, 4))
        order = rng.choice(("min", "max"))
        expected = reference(rows, pools, available, limit, None, order, set())
        assert [t.id for t in _peek(tq, available, None, order)] == expected[:1], f"step {step}: peek"
        got = tq.claim_many(available=available, limit=limit, order=order)  # type: ignore[arg-type]
        assert [t.id for t in got] == expected, f"step {step}: available={available} limit={limit} {order}"
        held.extend(got)
        while held and rng.random() < 0.5:
            tq.complete(held.pop())
    assert tq.check().ok


@pytest.mark.parametrize("seed", range(3))
def test_bulk_claim_matches_the_reference(tq: TaskQueue, dsn: str, seed: int) -> None:
    """No available amount and one queue: claim_tasks v5 locks the batch in one
    statement. With pools (full, tight and open), rows locked elsewhere and
    batches from one task to more than the queue holds, it takes exactly what
    the plain rule takes."""
    rng = random.Random(200 + seed)
    tq.enqueue_many([
        {"payload": {}, "queue": "a", "priority": rng.randint(0, 3), "required": rng.randint(0, 10**6),
         "pool": rng.choice((None, None, "p0", "p1", "p2"))}
        for _ in range(1500)
    ])
    tq.set_pool_limit("p0", 0)
    tq.set_pool_limit("p1", rng.choice((1, 5)))
    tq.set_pool_limit("p2", 40)
    held = []
    for step in range(25):
        rows, pools = snapshot(dsn)
        locked = {r.id for r in rows if rng.random() < 0.2}
        limit = rng.choice((1, 7, 100, 600, 2000))
        queues = rng.choice((None, ["a"]))
        expected = reference(rows, pools, None, limit, queues, "min", locked)
        with psycopg.connect(dsn) as other:
            other.execute("SELECT id FROM taskqueue.tasks WHERE id = ANY (%s) FOR UPDATE", (list(locked),))
            got = tq.claim_many(available=None, limit=limit, queues=queues)
        assert [t.id for t in got] == expected, f"step {step}: limit={limit}"
        held.extend(got)
        rng.shuffle(held)
        while held and rng.random() < 0.7:
            tq.complete(held.pop())
    assert tq.check().ok


@pytest.mark.parametrize("seed", range(3))
def test_single_claim_at_the_head_matches_the_reference(tq: TaskQueue, dsn: str, seed: int) -> None:
    """One task from one queue: claim_tasks v7 takes a fitting row among the
    first 8 in one statement. Heads of every mix: rows that fit or not, pooled
    rows that fit before an unpooled one (in full and open pools), rows locked
    elsewhere, and due scheduled tasks of a better priority."""
    rng = random.Random(300 + seed)
    tq.enqueue_many([
        {"payload": {}, "queue": "a", "priority": rng.randint(0, 2), "required": rng.choice((16, 40, 100, 5000)),
         "pool": rng.choice((None, None, None, "p0", "p1"))}
        for _ in range(600)
    ])
    tq.set_pool_limit("p0", 0)
    tq.set_pool_limit("p1", 2)
    held = []
    for step in range(60):
        if step % 15 == 7:  # a due scheduled task that beats the whole head
            with psycopg.connect(dsn) as conn:
                conn.execute(
                    "INSERT INTO taskqueue.tasks (queue, payload, priority, required, state, max_attempts, run_at) "
                    "VALUES ('a', '{}', -1, 16, 'scheduled', 1, now() - interval '1 second')"
                )
        rows, pools = snapshot(dsn)
        with psycopg.connect(dsn) as conn:  # due: the claim promotes it first
            rows += [Row(*r) for r in conn.execute(
                "SELECT id, queue, priority, required, pool FROM taskqueue.tasks "
                "WHERE state = 'scheduled' AND run_at <= now()"
            ).fetchall()]
        head = sorted(rows, key=lambda r: (r.priority, r.id))[:8]
        locked = {r.id for r in head if rng.random() < 0.3}
        available = rng.choice((16, 50, 200, 6000))
        queues = rng.choice((None, ["a"]))
        expected = reference(rows, pools, available, 1, queues, "min", locked)
        with psycopg.connect(dsn) as other:
            other.execute("SELECT id FROM taskqueue.tasks WHERE id = ANY (%s) FOR UPDATE", (list(locked),))
            got = tq.claim(available=available, queues=queues)
        assert ([got.id] if got else []) == expected, f"step {step}: available={available} locked={sorted(locked)}"
        if got is not None:
            held.append(got)
        rng.shuffle(held)
        while held and rng.random() < 0.5:
            tq.complete(held.pop())
    assert tq.check().ok


@pytest.mark.parametrize("seed", range(2))
def test_claims_over_many_queues_match_the_reference(tq: TaskQueue, dsn: str, seed: int) -> None:
    """70 queues, more than claim_tasks v9 lists at first (64), and a head of
    tasks too big, so a claim with no queue list walks the shared order, lists
    the rest of the queues, walks on and then asks each queue's buckets."""
    rng = random.Random(1000 + seed)
    queues = [f"q{i:02d}" for i in range(70)]
    specs = []
    for _ in range(3000):
        small = rng.random() < 0.05
        specs.append({
            "payload": {},
            "queue": rng.choice(queues),
            "priority": 9 if small else rng.randint(0, 8),
            "required": rng.randint(0, 60) if small else rng.randint(100, 200),
            "pool": rng.choice((None, None, None, "p0", "p1")),
        })
    tq.enqueue_many(specs)
    tq.set_pool_limit("p0", 0)
    held = []
    for step in range(25):
        rows, pools = snapshot(dsn)
        available = rng.choice((None, 0, 5, 30, 60, 150, 400)) if step % 5 else 60
        limit = rng.choice((1, 1, 4))
        order = rng.choice(("min", "min", "min", "max"))
        picked = rng.choice((None, None, None, queues[:3]))
        expected = reference(rows, pools, available, limit, picked, order, set())
        assert [t.id for t in _peek(tq, available, picked, order)] == expected[:1], f"step {step}: peek"
        got = tq.claim_many(available=available, limit=limit, queues=picked, order=order)  # type: ignore[arg-type]
        assert [t.id for t in got] == expected, f"step {step}: available={available} limit={limit} {order}"
        held.extend(got)
        while held and rng.random() < 0.5:
            tq.complete(held.pop())
    assert tq.check().ok


@pytest.mark.parametrize("seed", range(SEEDS // 2))
def test_single_claim_behind_a_pile_matches_the_reference(tq: TaskQueue, dsn: str, seed: int) -> None:
    """The look of claim_tasks v10: a pile of tasks too big in front, of a
    length around the look's budget (short, about 600, well past it), then
    tasks of every size, some in full or tight pools, and rows locked
    elsewhere among the first tasks that fit, where the look and the look
    again from the buckets' find must skip them. One queue of three, a list
    of two, or every queue."""
    rng = random.Random(500 + seed)
    pile = rng.choice((40, 590, 1500))
    specs: list[dict[str, object]] = [
        {"payload": {}, "queue": rng.choice(QUEUES), "priority": 0, "required": 600_000 + rng.randint(0, 9)}
        for _ in range(pile)
    ]
    specs += [
        {"payload": {}, "queue": rng.choice(QUEUES), "priority": rng.randint(0, 2),
         "required": rng.choice((1, 15, 40, 499_999, 500_000, 500_001, 900_000)),
         "pool": rng.choice((None, None, None, "p0", "p1"))}
        for _ in range(400)
    ]
    tq.enqueue_many(specs)
    tq.set_pool_limit("p0", 0)
    tq.set_pool_limit("p1", 3)
    single_claims_match_the_reference(
        tq, dsn, rng, lambda: rng.choice((16, 50, 500_000)), lambda: rng.choice((None, ["a"], ["a", "b"])),
        "min", lock_among=40, lock_share=0.4, label=f"pile={pile}")


def single_claims_match_the_reference(
    tq: TaskQueue, dsn: str, rng: random.Random, amount: Callable[[], int | None],
    queues: Callable[[], list[str] | None], order: str, lock_among: int, lock_share: float,
    steps: int = 40, label: str = "",
) -> None:
    """``steps`` single claims of ``amount()`` over ``queues()`` in ``order``,
    each with a ``lock_share`` of the first ``lock_among`` fits in its order
    locked elsewhere: each as the reference says. Claimed tasks complete now
    and then, which frees pool slots."""
    sign = 1 if order == "min" else -1
    held = []
    for step in range(steps):
        rows, pools = snapshot(dsn)
        available, listed = amount(), queues()
        fits = [r for r in sorted(rows, key=lambda r: (sign * r.priority, r.id))
                if (available is None or r.required <= available)
                and (listed is None or r.queue in listed)][:lock_among]
        locked = {r.id for r in fits if rng.random() < lock_share}
        expected = reference(rows, pools, available, 1, listed, order, locked)
        with psycopg.connect(dsn) as other:
            other.execute("SELECT id FROM taskqueue.tasks WHERE id = ANY (%s) FOR UPDATE", (list(locked),))
            got = tq.claim(available=available, queues=listed, order=order)  # type: ignore[arg-type]
        assert ([got.id] if got else []) == expected, (
            f"step {step}: {label} available={available} queues={listed} locked={sorted(locked)}")
        if got is not None:
            held.append(got)
        rng.shuffle(held)
        while held and rng.random() < 0.6:
            tq.complete(held.pop())
    assert tq.check().ok


def claims_match_the_reference(
    tq: TaskQueue, dsn: str, rng: random.Random, amount: Callable[[], int], limits: tuple[int, ...],
    steps: int = 30, lock_among: int = 20,
) -> None:
    """``steps`` claims over every queue of ``amount()``, in either order, each
    with some of the first ``lock_among`` fits in its order locked elsewhere,
    then a peek: each as the reference says. Claimed tasks complete now and
    then, which frees pool slots."""
    held = []
    for step in range(steps):
        rows, pools = snapshot(dsn)
        available, limit, order = amount(), rng.choice(limits), rng.choice(("min", "max"))
        sign = 1 if order == "min" else -1
        fits = sorted((r for r in rows if r.required <= available), key=lambda r: (sign * r.priority, r.id))
        locked = {r.id for r in fits[:lock_among] if rng.random() < 0.3}
        expected = reference(rows, pools, available, limit, None, order, locked)
        with psycopg.connect(dsn) as other:
            other.execute("SELECT id FROM taskqueue.tasks WHERE id = ANY (%s) FOR UPDATE", (list(locked),))
            got = tq.claim_many(available=available, limit=limit, order=order)  # type: ignore[arg-type]
        assert [t.id for t in got] == expected, f"step {step}: available={available} limit={limit} {order}"
        expected = reference(*snapshot(dsn), available, 1, None, order, set())
        assert [t.id for t in _peek(tq, available, None, order)] == expected, f"step {step}: peek {order}"
        held.extend(got)
        rng.shuffle(held)
        while held and rng.random() < 0.5:
            tq.complete(held.pop())
    assert tq.check().ok
