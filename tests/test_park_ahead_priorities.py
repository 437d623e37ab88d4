"""A claim that took a task parks the fits ahead of it across priorities whose pool is full (migration 0057).

Where every task has its own priority (deadlines, epoch seconds, scores),
park_rows v6 read ahead only within the priorities of the rows the claim
passed, where nothing else lies, so each claim parked only what it had passed
and the next claim met the same mix again. park_rows v7, told the claim's
amount and direction by claim_tasks v42, reads on across priorities and parks
the fits among those rows whose pool it locked full. What a claim returns
does not change: the tests claim everything and compare with the order the
naive query gives. ``tq`` is the project's pytest plugin's (a TaskQueue on
the test's own database, the one ``dsn`` names).
"""

from __future__ import annotations

import psycopg
import pytest

from taskqueue import TaskQueue
from tests.test_parking import parked


def mixed(tq: TaskQueue, count: int = 301) -> dict[str, list[int]]:
    """Each task its own priority, in threes: a fit in a full pool, a fit with no pool, a full pool's task too big.

    301 of them, so that a fit in a full pool comes first in both orders.
    """
    for p in range(3):
        tq.set_pool_limit(f"full{p}", 0)
    ids = tq.enqueue_many(
        [
            {"payload": i, "priority": i, "required": 10 if i % 3 == 2 else 2,
             **({"pool": f"full{i % 9 // 3}"} if i % 3 != 1 else {})}
            for i in range(count)
        ]
    )
    return {"full_fits": ids[0::3], "free": ids[1::3], "too_big": ids[2::3]}


def parked_now(conn: psycopg.Connection) -> list[int] | None:
    """The parked tasks' ids as this transaction sees them (its own parking included)."""
    row = conn.execute("SELECT array_agg(id ORDER BY id) FROM taskqueue.tasks WHERE parked").fetchone()
    assert row is not None
    return row[0]


@pytest.mark.parametrize("order", ["min", "max"])
def test_a_claim_parks_the_full_pools_fits_ahead_across_priorities(tq: TaskQueue, dsn: str, order: str) -> None:
    rows = mixed(tq)
    ahead = rows["full_fits"] if order == "min" else rows["full_fits"][::-1]
    got = tq.claim(available=4, order=order)  # type: ignore[arg-type]
    free = rows["free"] if order == "min" else rows["free"][::-1]
    assert got is not None and got.id == free[0]
    now = parked(dsn)
    assert set(now) <= set(rows["full_fits"]), "only fits of full pools are parked, never a task too big or a free one"
    # Version 6 parked the few fits the claim passed (4 here); version 7 the next 64 rows' fits in full pools too.
    assert len(now) >= 20, now
    assert set(ahead[:20]) <= set(now), "the fits parked are the next ones in the claim's own order"
    # The contract holds: every free task, in claim order, and nothing else.
    taken = [got.id]
    while (task := tq.claim(available=4, order=order)) is not None:  # type: ignore[arg-type]
        taken.append(task.id)
    assert taken == free
    assert set(parked(dsn)) == set(rows["full_fits"])
    assert tq.check().ok
    # A full pool that gets room puts its tasks back, and the next claim takes its best one.
    tq.set_pool_limit("full1", None)
    back = [i for n, i in enumerate(rows["full_fits"]) if n % 3 == 1]
    got = tq.claim(available=4, order=order)  # type: ignore[arg-type]
    assert got is not None and got.id == (back[0] if order == "min" else back[-1])
    assert tq.check().ok


def test_park_rows_reads_across_priorities_only_when_told_the_direction(tq: TaskQueue, dsn: str) -> None:
    rows = mixed(tq)
    first = rows["full_fits"][0]
    with psycopg.connect(dsn) as conn:
        # Without a direction (claim_tasks v41's call): the passed row only, its priority holding nothing else.
        conn.execute("SELECT taskqueue.park_rows(%s::bigint[], '{}')", ([first],))
        assert parked_now(conn) == [first]
        conn.rollback()
        # Ascending with an amount of 4: the fits of full pools in the next 64 rows, not the tasks too big.
        conn.execute("SELECT taskqueue.park_rows(%s::bigint[], '{}', false, 4, false)", ([first],))
        got = parked_now(conn)
        assert got == rows["full_fits"][:22], got  # priorities 0 and 3..63: 1 + 21 rows
        conn.rollback()
        # Descending from the same row: nothing lies ahead of priority 0 in that order.
        conn.execute("SELECT taskqueue.park_rows(%s::bigint[], '{}', false, 4, true)", ([first],))
        assert parked_now(conn) == [first]
        conn.rollback()
        # No amount: every task fits, so the full pools' tasks too big for 4 are parked as well.
        conn.execute("SELECT taskqueue.park_rows(%s::bigint[], '{}', false, NULL, false)", ([first],))
        got = parked_now(conn)
        pooled = sorted(rows["full_fits"] + rows["too_big"])
        assert got == [first] + [i for i in pooled if first < i <= first + 64], got
        conn.rollback()
    assert parked(dsn) == []


def test_a_pool_with_room_is_never_parked_ahead(tq: TaskQueue, dsn: str) -> None:
    tq.set_pool_limit("full", 0)
    tq.set_pool_limit("roomy", 1_000)
    ids = tq.enqueue_many([{"payload": i, "priority": i, "required": 1, "pool": "full" if i % 2 == 0 else "roomy"}
                           for i in range(200)])
    got = tq.claim(available=1)
    assert got is not None and got.id == ids[1]
    now = parked(dsn)
    assert now and set(now) <= set(ids[0::2]), now
    assert len(now) > 4, "the full pool's fits ahead are parked with the one passed"
    assert tq.check().ok
