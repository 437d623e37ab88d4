"""A claim over every queue with less than 16 left asks every queue's small tasks at once (claim_tasks v20).

Over many queues whose heads hold nothing that fits, such a claim used to
list every queue with claimable tasks, walk the shared order a share per
queue and ask each queue's buckets. fit_candidate v9 answers it with one
probe per amount of ix_tasks_fit_small_any (bucket, priority, id) (since
migration 0053, of ix_tasks_fit_any_exact by required), so the
claim lists no queue. It must still take exactly what the plain rule takes
(tests/test_claim_exact.py's reference): single claims and batches, pools
full and open, rows locked elsewhere, and a batch whose amount drops below
16 after a queue list was made for the larger amount.
"""

from __future__ import annotations

import random
from typing import Any

import psycopg
import pytest

from taskqueue import TaskQueue
from tests.test_claim_exact import claims_match_the_reference, reference, snapshot
from tests.test_claim_plan import _calls_in_transaction

QUEUES = [f"q{i:03d}" for i in range(120)]


def many_queues(rng: random.Random, n: int) -> list[Any]:
    """Tasks too big for small amounts at the better priorities; the small ones (1..15) last, a few per queue."""
    specs: list[Any] = []
    for i in range(n):
        small = i >= n * 9 // 10
        specs.append({
            "payload": {},
            "queue": rng.choice(QUEUES),
            "priority": i if small or rng.random() < 0.8 else rng.randint(0, n),
            "required": rng.randint(0, 15) if small else rng.choice((16, 40, 100, 5000)),
            "pool": rng.choice((None, None, None, "p0", "p1")),
        })
    return specs


@pytest.mark.parametrize("seed", range(3))
def test_claims_over_every_queue_match_the_reference(tq: TaskQueue, dsn: str, seed: int) -> None:
    rng = random.Random(900 + seed)
    tq.enqueue_many(many_queues(rng, 2000))
    tq.set_pool_limit("p0", 0)
    tq.set_pool_limit("p1", 20)
    claims_match_the_reference(tq, dsn, rng, lambda: rng.choice((0, 1, 4, 9, 15, 15, 20, 60)), limits=(1, 1, 3, 10))


def test_a_small_claim_over_every_queue_lists_none(dsn: str) -> None:
    """120 queues, 1,800 tasks too big at the head, the small ones behind them:
    one probe statement answers, where v19 listed the queues (claimable_queues)
    and asked every queue's buckets. Descending, the small ones come first,
    but v19 listed every queue before anything else."""
    rng = random.Random(5)
    tq = TaskQueue(dsn)
    try:
        tq.enqueue_many([{**s, "pool": None} for s in many_queues(rng, 2000)])
    finally:
        tq.close()
    with psycopg.connect(dsn) as conn:
        conn.execute("SELECT set_config('search_path', 'taskqueue', false)")
        conn.commit()
        rows, pools = snapshot(dsn)
        # The single claims first: a count of calls may still hold an earlier claim's.
        for available, limit, order in ((4, 1, "min"), (15, 1, "min"), (4, 1, "max"), (15, 5, "min"),
                                        (0, 2, "min"), (15, 5, "max")):
            expected = reference(rows, pools, available, limit, None, order, set())
            ids, calls = _calls_in_transaction(
                conn, f"SELECT id FROM claim_tasks({available}, {limit}, NULL, 'w', 60, {order == 'max'})"
            )
            assert ids == expected, (available, limit, order)
            if limit == 1:  # step S (version 26; descending, 27): the claim alone (the counts may hold
                assert set(calls) == {"claim_tasks"}, calls  # earlier claims' calls not yet flushed)
            else:
                assert "claimable_queues" not in calls and calls.get("fit_candidate", 0) >= 1, calls
