"""A state change that PostgreSQL rolls back to break a deadlock runs again.

The circle is built by hand, as a four-process drain once met it: one
transaction holds a parked task row of a full pool (what a claim's READ
COMMITTED recheck can leave locked) and then waits for the pool's row; the
completion that frees the pool holds that row while its trigger waits to
unpark the task. The completion waited first, so its deadlock check fires
first and PostgreSQL rolls it back; the API must run it again, not raise.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import psycopg
import pytest

from taskqueue import TaskQueue
from taskqueue.errors import DatabaseError
from tests.support.apis import tq  # noqa: F401  (the contract runs against both APIs)


def _lock_waiters(conn: psycopg.Connection[Any]) -> int:
    row = conn.execute(
        "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'"
    ).fetchone()
    assert row is not None
    return int(row[0])


def _wait_for_lock_waiters(conn: psycopg.Connection[Any], n: int) -> None:
    deadline = time.monotonic() + 30
    while _lock_waiters(conn) < n:
        assert time.monotonic() < deadline, "the completion never waited for the parked row"
        time.sleep(0.01)


def _full_pool_with_parked_tasks(tq: TaskQueue, dsn: str) -> tuple[Any, int]:
    """Pool 'net' (limit 1) runs one task; three more are parked behind it. Returns the holder and a parked id."""
    tq.set_pool_limit("net", 1)
    tq.enqueue_many([{"payload": i, "pool": "net"} for i in range(4)])
    holder = tq.claim()
    assert holder is not None and holder.pool == "net"
    assert tq.claim() is None  # the pool is full: this claim parks the other three
    with psycopg.connect(dsn) as conn:
        parked = [r[0] for r in conn.execute("SELECT id FROM taskqueue.tasks WHERE parked ORDER BY id")]
    assert len(parked) == 3
    return holder, parked[0]


def _close_the_circle(dsn: str, parked_id: int, finish: Any) -> BaseException | None:
    """Hold ``parked_id``, let ``finish`` start and wait on it, then wait for the pool row ``finish`` holds."""
    outcome: list[BaseException | None] = []

    def run() -> None:
        try:
            finish()
        except BaseException as exc:  # the test reports it
            outcome.append(exc)
        else:
            outcome.append(None)

    with psycopg.connect(dsn) as watcher, psycopg.connect(dsn) as other:
        watcher.autocommit = True
        other.execute("SELECT 1 FROM taskqueue.tasks WHERE id = %s FOR UPDATE", (parked_id,))
        thread = threading.Thread(target=run)
        thread.start()
        _wait_for_lock_waiters(watcher, 1)  # the release's trigger waits for the row held here
        # Now wait for the pool's row, which the release holds: a deadlock. The
        # release waited first, so PostgreSQL rolls it back and this goes on.
        # Each waiter checks for a deadlock deadlock_timeout after it began to
        # wait; on a loaded machine the two checks can come out of order, so
        # this side waits longer before it looks (where the role may set it).
        if other.execute("SELECT rolsuper FROM pg_roles WHERE rolname = current_user").fetchone() == (True,):
            other.execute("SET LOCAL deadlock_timeout = '10s'")
        other.execute("UPDATE taskqueue.pools SET running = running WHERE name = 'net'")
        other.commit()
        thread.join(timeout=60)
    assert not thread.is_alive()
    assert outcome
    return outcome[0]


def test_a_completion_rolled_back_by_a_deadlock_runs_again(tq: TaskQueue, dsn: str) -> None:
    holder, parked_id = _full_pool_with_parked_tasks(tq, dsn)
    before = tq.counters.snapshot().by_process["lock_retries"]

    error = _close_the_circle(dsn, parked_id, lambda: tq.complete(holder))

    assert error is None, f"the completion raised: {error!r}"
    assert tq.counters.snapshot().by_process["lock_retries"] == before + 1
    done = tq.get(holder.id)
    assert done is not None and done.state == "done"
    pool = tq.pool("net")
    assert pool is not None and pool.running == 0
    with psycopg.connect(dsn) as conn:
        assert conn.execute("SELECT count(*) FROM taskqueue.tasks WHERE parked").fetchone() == (0,)
    assert tq.claim() is not None  # the freed slot is usable at once
    assert tq.check().ok


@pytest.mark.sync_api
def test_in_the_callers_transaction_the_deadlock_is_the_callers(tq: TaskQueue, dsn: str) -> None:
    """The caller's whole transaction was rolled back, so only the caller can run it again."""
    holder, parked_id = _full_pool_with_parked_tasks(tq, dsn)

    def in_callers_transaction() -> None:
        with tq.engine.begin() as conn:
            tq.complete(holder, connection=conn)

    error = _close_the_circle(dsn, parked_id, in_callers_transaction)

    assert isinstance(error, DatabaseError) and error.transient
    assert "deadlock" in str(error)
    assert tq.counters.snapshot().by_process["lock_retries"] == 0
    still = tq.get(holder.id)
    assert still is not None and still.state == "running"  # nothing of it was written
    tq.complete(holder)
    assert tq.check().ok


def test_a_claim_that_gave_up_waiting_for_its_pool_runs_again_with_the_same_queues(tq: TaskQueue, dsn: str) -> None:
    """A lock timeout counts as a deadlock does; a generator of queue names is read once, not once per try."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f"ALTER DATABASE {conn.info.dbname} SET lock_timeout = '100ms'")
    tq.set_pool_limit("net", 5)
    task_id = tq.enqueue({}, queue="scan", pool="net")
    with TaskQueue(dsn) as fresh, psycopg.connect(dsn) as other:  # fresh connections see the new setting
        other.execute("SELECT 1 FROM taskqueue.pools WHERE name = 'net' FOR UPDATE")  # the claim waits for this
        got: list[Any] = []
        thread = threading.Thread(target=lambda: got.append(fresh.claim(queues=(q for q in ["scan"]))))
        thread.start()
        deadline = time.monotonic() + 30
        while fresh.counters.snapshot().by_process["lock_retries"] < 1:  # the first try gave up after 100 ms
            assert time.monotonic() < deadline, "the claim never gave up waiting"
            time.sleep(0.005)
        other.rollback()
        thread.join(timeout=30)
    assert got and got[0] is not None and got[0].id == task_id
    pool = tq.pool("net")
    assert pool is not None and pool.running == 1
