"""A claim that passed many fits in full pools parks the rows ahead in bulk (migration 0059).

park_rows v7 read 64 rows ahead in each of 8 groups (queue, priority) of the
fits a claim passed, unless the claim passed 500. A head of thousands of
tasks in full pools over a list of queues was then parked a few hundred rows
a claim, each of those claims passing a full pool per call of fit_candidate
(the eleventh random draw's r24: 66 claims of about 80 ms). park_rows v8
reads ahead in bulk once a claim of one task passed 8 such fits: every group they lie in,
c_bulk rows in all. A claim of several tasks parks as before (claim_tasks v44 tells
park_rows which it is). What a claim returns does not change: the tests
claim everything and compare with the plain rule.
"""

from __future__ import annotations

import psycopg
import pytest

from taskqueue import TaskQueue
from tests.test_parking import parked

FULL_POOLS = 12


def full_head(tq: TaskQueue, per_queue: int = 700) -> dict[str, list[int]]:
    """Queues 'a' and 'b' hold, at priority 0, tasks spread over 12 full pools; 'c' holds open tasks at priority 1.

    Queue 'z', not listed by the claims here, holds tasks at priority 0 too, so
    that a look along the order over every queue meets its rows first.
    """
    for p in range(FULL_POOLS):
        tq.set_pool_limit(f"full{p}", 0)
    tq.set_pool_limit("open", None)
    full = tq.enqueue_many(
        [{"payload": i, "queue": q, "priority": 0, "required": 1 + i % 5, "pool": f"full{i % FULL_POOLS}"}
         for q in ("a", "b") for i in range(per_queue)]
    )
    tq.enqueue_many([{"payload": i, "queue": "z", "priority": 0, "required": 3} for i in range(300)])
    free = tq.enqueue_many([{"payload": i, "queue": "c", "priority": 1, "required": 1 + i % 5, "pool": "open"}
                            for i in range(40)])
    return {"full": full, "free": free}


@pytest.mark.parametrize("order", ["min", "max"])
def test_a_claim_that_passed_many_full_pools_parks_their_rows_ahead_in_bulk(
        tq: TaskQueue, dsn: str, order: str) -> None:
    rows = full_head(tq)
    queues = ["a", "b", "c"]
    got = tq.claim(available=5, order=order, queues=queues)  # type: ignore[arg-type]
    free = rows["free"]  # priority 1: after the full pools' tasks in "min", before them in "max"
    assert got is not None and got.id == free[0]
    taken = [got.id]
    if order == "min":
        now = set(parked(dsn))
        assert now <= set(rows["full"]), "only tasks of full pools are parked"
        # The claim passed fits of queue 'a' first (lower ids): version 7 parked them and the 64 rows
        # after them; version 8 the whole group, 700 rows, well under c_bulk.
        assert set(rows["full"][:700]) <= now, len(now)
        second = tq.claim(available=5, order=order, queues=queues)  # type: ignore[arg-type]
        assert second is not None and second.id == free[1]
        assert set(parked(dsn)) == set(rows["full"]), "the second claim parks queue 'b''s group"
        taken.append(second.id)
    else:
        # Descending, the open tasks come first: nothing is passed, nothing parked.
        assert parked(dsn) == []
    while (task := tq.claim(available=5, order=order, queues=queues)) is not None:  # type: ignore[arg-type]
        taken.append(task.id)
    assert taken == free
    assert tq.check().ok
    # A full pool that gets room puts its tasks back, and the next claim takes its best one.
    tq.set_pool_limit("full3", None)
    back = [i for n, i in enumerate(rows["full"]) if n % 700 % FULL_POOLS == 3]
    got = tq.claim(available=5, order=order, queues=queues)  # type: ignore[arg-type]
    assert got is not None and got.id == back[0]
    assert tq.check().ok


def call_park_rows(dsn: str, ids: list[int], single: bool = True) -> list[int]:
    """park_rows as claim_tasks v44 calls it after a claim of one task (single) or of several."""
    with psycopg.connect(dsn) as conn:
        conn.execute("SELECT taskqueue.park_rows(%s::bigint[], '{}', false, 5, false, %s)", (ids, single))
    return parked(dsn)


def test_from_eight_passed_fits_every_group_is_read_ahead_in_bulk(tq: TaskQueue, dsn: str) -> None:
    rows = full_head(tq)
    per_queue = len(rows["full"]) // 2
    a, b = rows["full"][:per_queue], rows["full"][per_queue:]
    # Eight passed fits, four in each group: the rest of both groups is parked.
    passed = a[:4] + b[:4]
    assert call_park_rows(dsn, passed) == sorted(rows["full"])


@pytest.mark.parametrize("single", [True, False])
def test_below_eight_passed_fits_or_for_a_batch_a_group_reads_64_rows_ahead(
        tq: TaskQueue, dsn: str, single: bool) -> None:
    rows = full_head(tq)
    per_queue = len(rows["full"]) // 2
    a, b = rows["full"][:per_queue], rows["full"][per_queue:]
    # One task: seven passed fits. Several tasks (claim_many): eight, which a batch passes as it takes others.
    passed = a[:4] + b[:3] if single else a[:4] + b[:4]
    got = call_park_rows(dsn, passed, single)
    assert got == sorted(a[:4 + 64] + b[:len(passed) - 4 + 64])


def test_bulk_read_parks_no_task_with_room_or_no_pool(tq: TaskQueue, dsn: str) -> None:
    tq.set_pool_limit("full", 0)
    tq.set_pool_limit("open", None)
    ids = tq.enqueue_many(
        [{"payload": i, "queue": "a", "priority": 0,
          **({"pool": "full"} if i % 3 == 0 else {"pool": "open"} if i % 3 == 1 else {})}
         for i in range(3000)]
    )
    full = [i for n, i in enumerate(ids) if n % 3 == 0]
    got = call_park_rows(dsn, full[:8])
    assert got == sorted(full), "every task of the full pool in the group, and nothing else"
    assert tq.check().ok


def test_bulk_read_is_bounded_by_c_bulk_rows(tq: TaskQueue, dsn: str) -> None:
    """Eight passed fits in one group of 10,000 more: 8,192 rows are read ahead, so that many are parked."""
    tq.set_pool_limit("full", 0)
    ids = tq.enqueue_many([{"payload": i, "queue": "a", "priority": 0, "pool": "full"} for i in range(10_008)])
    got = call_park_rows(dsn, ids[:8])
    assert got == sorted(ids[:8 + 8192])
    assert tq.check().ok


def test_a_batch_that_passes_full_pools_parks_64_rows_a_group(tq: TaskQueue, dsn: str) -> None:
    """claim_many passes fits in full pools as it takes the others: it parks those and 64 rows ahead, as before."""
    tq.set_pool_limit("full", 0)
    tq.set_pool_limit("open", None)
    ids = tq.enqueue_many([{"payload": i, "queue": "a", "priority": 0, "pool": "full" if i % 2 == 0 else "open"}
                           for i in range(1000)])
    got = tq.claim_many(available=500, limit=20, queues=["a", "z"])
    assert [t.id for t in got] == ids[1::2][:20]
    now = parked(dsn)
    passed = ids[0::2][:20]
    assert set(passed) <= set(now)
    # A claim of one task would have read 8,192 rows ahead and parked all 500.
    assert len(now) <= len(passed) + 64, len(now)
    assert tq.check().ok
