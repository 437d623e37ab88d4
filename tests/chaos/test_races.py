"""Rescue against completion, in both orders, with pause points instead of sleeps.

The pause point is a transaction left open: one side runs its statement and
holds the task row (and pool row) lock; the test then starts the other side,
waits until PostgreSQL reports it waiting on that lock (or sees that it
skipped the row), and only then lets the first side commit or roll back.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest

from taskqueue import LeaseLost, Task, TaskQueue
from taskqueue.db import drive
from taskqueue.store import tasks as task_store
from tests.chaos.harness import assert_invariants, bump, query, wait_for


def expired_claim(tq: TaskQueue, dsn: str, pool: str = "p") -> Task:
    """A real claim whose short lease has run out by the database clock."""
    tq.set_pool_limit(pool, 1)
    task_id = tq.enqueue({"race": True}, pool=pool)
    task = tq.claim(lease=0.05)
    assert task is not None and task.id == task_id
    wait_for(
        lambda: query(dsn, "SELECT clock_timestamp() > lease_expires_at FROM taskqueue.tasks WHERE id = %s",
                      (task_id,))[0][0],
        timeout=10,
        what="the lease to expire",
        step=0.01,
    )
    return task


def lock_waiters(dsn: str) -> int:
    return query(
        dsn,
        "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'",
    )[0][0]


class Side(threading.Thread):
    """Runs one call in a thread and keeps its outcome."""

    def __init__(self, fn: Callable[[], Any]) -> None:
        super().__init__(daemon=True)
        self.fn = fn
        self.result: Any = None
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            self.result = self.fn()
        except BaseException as exc:
            self.error = exc


@pytest.mark.parametrize("late_call", ["complete", "fail", "heartbeat"])
def test_rescue_first_then_the_late_holder_is_refused(tq: TaskQueue, ledger: str, late_call: str) -> None:
    task = expired_claim(tq, ledger)
    with tq.engine.connect() as rescuer:
        rescuer.begin()
        rescued = drive(rescuer, task_store.rescue_expired())  # pause point: row and pool locked, not committed
        assert [(r[0], r[2]) for r in rescued] == [(task.id, "queued")]
        calls = {
            "complete": lambda: tq.complete(task, "late"),
            "fail": lambda: tq.fail(task, "late", retry_in=0),
            "heartbeat": lambda: tq.heartbeat(task),
        }
        late = Side(calls[late_call])
        late.start()
        wait_for(lambda: lock_waiters(ledger) == 1, 10, "the late holder to wait on the rescue's lock", 0.01)
        rescuer.commit()
    late.join(10)
    assert isinstance(late.error, LeaseLost), late.error
    got = tq.get(task.id)
    assert got is not None and got.state == "queued" and got.attempts == 1
    assert tq.pool("p").running == 0
    # The next claim runs it again, under a new token, exactly once.
    again = tq.claim()
    assert again is not None and again.id == task.id and again.attempts == 2
    tq.complete(again, "ok")
    with pytest.raises(LeaseLost):
        tq.complete(task, "stale handle")
    bump("rescue-vs-completion races")
    assert_invariants(tq, ledger, expected_tasks=1)


def test_completion_first_then_rescue_skips_it(tq: TaskQueue, ledger: str) -> None:
    task = expired_claim(tq, ledger)
    with tq.engine.connect() as holder:
        holder.begin()
        tq.complete(task, {"ok": 1}, connection=holder)  # pause point: done but not committed
        assert tq.rescue_expired() == 0  # the locked row is skipped, not waited for, not rescued
        assert lock_waiters(ledger) == 0
        holder.commit()
    assert tq.rescue_expired() == 0
    got = tq.get(task.id)
    assert got is not None and got.state == "done" and got.result == {"ok": 1}
    assert tq.pool("p").running == 0
    bump("rescue-vs-completion races")
    assert_invariants(tq, ledger, expected_tasks=1)


def test_completion_rolled_back_after_rescue_skipped_it(tq: TaskQueue, ledger: str) -> None:
    task = expired_claim(tq, ledger)
    with tq.engine.connect() as holder:
        holder.begin()
        tq.complete(task, "never committed", connection=holder)
        assert tq.rescue_expired() == 0
        holder.rollback()  # the holder crashed before its commit
    assert tq.rescue_expired() == 1  # now the expired lease is rescued
    assert tq.pool("p").running == 0
    with pytest.raises(LeaseLost):
        tq.complete(task, "retry of the lost commit")
    again = tq.claim()
    assert again is not None and again.attempts == 2
    tq.complete(again, "ok")
    bump("rescue-vs-completion races")
    assert_invariants(tq, ledger, expected_tasks=1)


def test_concurrent_rescuers_rescue_once(tq: TaskQueue, ledger: str) -> None:
    task = expired_claim(tq, ledger)
    with tq.engine.connect() as first:
        first.begin()
        assert len(drive(first, task_store.rescue_expired())) == 1
        assert tq.rescue_expired() == 0  # the second rescuer skips the locked row
        first.commit()
    assert tq.rescue_expired() == 0
    assert tq.get(task.id).state == "queued"  # type: ignore[union-attr]
    assert tq.pool("p").running == 0
    again = tq.claim()
    assert again is not None
    tq.complete(again)
    bump("rescue-vs-completion races")
    assert_invariants(tq, ledger, expected_tasks=1)
