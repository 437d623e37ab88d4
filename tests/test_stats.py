"""stats(): counts by state (every state, zeros included), queues, pools."""

from __future__ import annotations

import psycopg

from taskqueue import PoolStats, TaskQueue
from taskqueue.task import STATES
from tests.support.apis import tq  # noqa: F401  (the contract runs against both APIs)

EXPECTED_STATES = {"queued", "scheduled", "running", "done", "failed", "cancelled"}


def test_empty_stats_have_every_state_with_zero(tq: TaskQueue) -> None:
    stats = tq.stats()
    assert set(stats.by_state) == EXPECTED_STATES == set(STATES)
    assert all(v == 0 for v in stats.by_state.values())
    assert stats.total == 0
    assert stats.pools == ()


def test_stats_count_every_state(tq: TaskQueue, dsn: str) -> None:
    tq.set_pool_limit("p", 5)
    tq.enqueue_many([{"payload": i, "queue": "a" if i < 6 else "b", "pool": "p"} for i in range(8)])
    tq.enqueue("later", delay=600)
    due = tq.enqueue("due soon", delay=600)
    t1, t2, t3, t4 = tq.claim_many(limit=4)
    tq.complete(t1)
    tq.fail(t2, "x", retry=False)
    tq.cancel(t3.id)
    tq.complete(t3)
    queued_cancel = tq.enqueue("to cancel")
    tq.cancel(queued_cancel)
    with psycopg.connect(dsn) as conn:
        conn.execute("UPDATE taskqueue.tasks SET run_at = now() - interval '1 s' WHERE id = %s", (due,))
    stats = tq.stats()
    # A due scheduled task is reported as queued.
    assert stats.by_state == {
        "queued": 5,
        "scheduled": 1,
        "running": 1,
        "done": 1,
        "failed": 1,
        "cancelled": 2,
    }
    assert stats.total == 11
    assert stats.by_queue["b"]["queued"] == 2 and stats.by_queue["b"]["done"] == 0
    assert stats.pools == (PoolStats("p", limit=5, running=1, parked=0),)
    assert t4.state == "running"
    assert stats.throughput_per_second > 0
    assert sum(w.waiting for w in stats.waiting_by_priority) == 5
