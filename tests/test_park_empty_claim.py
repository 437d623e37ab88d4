"""A claim that takes nothing because every fit is in a full pool parks those fits in bulk (migration 0046).

Such a claim has met every pool holding a fit it could see (fit_candidate
passes over the pools already found full), so parking those pools' fits is
safe and saves the next claims from meeting them again. Before, with every
task its own priority, an empty claim parked only the candidates it tried
(about one per pool) and the next claim met the same fits again.
"""

from __future__ import annotations

from collections.abc import Iterator

import psycopg
import pytest

from taskqueue import TaskQueue
from tests.test_parking import parked


@pytest.fixture
def tq(dsn: str) -> Iterator[TaskQueue]:
    queue = TaskQueue(dsn)
    try:
        yield queue
    finally:
        queue.close()


def fits_in_full_pools(tq: TaskQueue, count: int, pools: int = 20, queues: tuple[str, ...] = ("default",)) -> list[int]:
    """``count`` tasks needing 1..4, each its own priority, spread over ``pools`` full pools and ``queues``."""
    for p in range(pools):
        tq.set_pool_limit(f"full{p}", 0)
    return tq.enqueue_many(
        [
            {"payload": i, "required": 1 + i % 4, "priority": 1_000 + i, "pool": f"full{i % pools}",
             "queue": queues[i % len(queues)]}
            for i in range(count)
        ]
    )


def too_big(tq: TaskQueue, count: int, queues: tuple[str, ...] = ("default",)) -> list[int]:
    """Tasks that need 50, each its own priority, ahead of everything in claim order; half in a full pool."""
    tq.set_pool_limit("bigfull", 0)
    return tq.enqueue_many(
        [
            {"payload": i, "required": 50, "priority": i, "queue": queues[i % len(queues)],
             **({"pool": "bigfull"} if i % 2 else {})}
            for i in range(count)
        ]
    )


def test_an_empty_claim_parks_every_fit_of_the_full_pools_it_met(tq: TaskQueue, dsn: str) -> None:
    big = too_big(tq, 500)
    fits = fits_in_full_pools(tq, 3_000)
    assert tq.claim(available=4) is None
    # Version 31 parked the 20 candidates it tried (one a pool) and nothing ahead of them.
    assert parked(dsn) == fits
    assert not set(parked(dsn)) & set(big), "a task that does not fit is not read for this"
    assert tq.check().ok
    # The next empty claim finds nothing to pass over, and parks nothing more.
    assert tq.claim(available=4) is None
    assert parked(dsn) == fits
    # A pool that gets room puts its tasks back, and the best of them is claimed.
    tq.set_pool_limit("full7", None)
    got = tq.claim(available=4)
    assert got is not None and got.id == fits[7]
    assert tq.check().ok


def test_an_empty_claim_reads_at_most_8192_rows_for_it(tq: TaskQueue, dsn: str) -> None:
    fits = fits_in_full_pools(tq, 10_000, pools=2)
    assert tq.claim(available=4) is None
    first = parked(dsn)
    assert 8_192 <= len(first) <= 8_192 + 2, len(first)
    assert set(first) <= set(fits)
    assert tq.claim(available=4) is None
    assert parked(dsn) == fits
    assert tq.check().ok


def test_empty_claims_over_every_queue_a_list_descending_and_of_many(tq: TaskQueue, dsn: str) -> None:
    queues = ("a", "b", "c")
    fits = fits_in_full_pools(tq, 1_500, queues=queues)
    too_big(tq, 300, queues=queues)
    in_a = [i for n, i in enumerate(fits) if queues[n % 3] == "a"]
    assert tq.claim(available=4, queues=["a"], order="max") is None
    assert parked(dsn) == in_a, "a claim of queue a parks nothing of b and c"
    assert tq.claim_many(limit=5, available=4, queues=["b", "c"]) == []
    assert parked(dsn) == fits
    assert tq.claim(available=4) is None  # every queue: nothing left to park
    assert parked(dsn) == fits
    tq.set_pool_limit("full3", None)  # its tasks go back; in queue b the best of them is fits[43]
    got = tq.claim(available=4, queues=["b"])
    assert got is not None and got.id == fits[43]
    assert tq.check().ok


def test_a_claim_left_empty_by_row_locks_parks_only_full_pools_fits(tq: TaskQueue, dsn: str) -> None:
    tq.set_pool_limit("open", 5)
    fits = fits_in_full_pools(tq, 200, pools=4)
    free = tq.enqueue_many([{"payload": i, "required": 2, "priority": 5_000 + i, "pool": "open" if i % 2 else None}
                            for i in range(10)])
    with psycopg.connect(dsn) as other:
        other.execute("SELECT id FROM taskqueue.tasks WHERE id = ANY (%s) FOR UPDATE", (free,))
        assert tq.claim(available=4) is None  # every fit outside a full pool is locked by another transaction
        assert parked(dsn) == fits
        other.rollback()
    assert tq.claim(available=4).id == free[0]  # type: ignore[union-attr]
    assert tq.check().ok


def test_an_empty_claim_with_no_amount_parks_the_full_pools_tasks(tq: TaskQueue, dsn: str) -> None:
    for p in range(3):
        tq.set_pool_limit(f"full{p}", 0)
    ids = tq.enqueue_many([{"payload": i, "priority": i, "required": i, "pool": f"full{i % 3}"}
                           for i in range(600)])
    assert tq.claim() is None
    assert parked(dsn) == ids
    assert tq.check().ok
