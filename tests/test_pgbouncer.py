"""Through a real PgBouncer in transaction mode: ``poll_only`` works, the default does not.

Skipped without a pgbouncer binary; failed instead when
``TASKQUEUE_REQUIRE_PGBOUNCER=1`` (CI installs it).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator

import pytest

from taskqueue import DatabaseError, Task, TaskQueue
from tests.support.pgbouncer import pgbouncer
from tests.test_worker import WAIT, new_worker, recorded, running


@pytest.fixture
def bouncer(dsn: str) -> Iterator[str]:
    """The DSN of a PgBouncer (transaction pooling, one server connection) in front of this test's database."""
    with pgbouncer(dsn, pool_size=1) as url:
        yield url


def test_a_poll_only_worker_drains_through_pgbouncer(bouncer: str, dsn: str) -> None:
    with TaskQueue(bouncer, poll_only=True) as tq, TaskQueue(dsn) as direct:
        tq.set_pool_limit("net", 1)
        w = new_worker(lease=0.3, poll_interval=0.1)  # poll_only comes from the queue
        beat_seen = threading.Event()

        @w.handler("sync")
        def sync(task: Task) -> int:
            assert beat_seen.wait(WAIT)  # held until a heartbeat went through pgbouncer
            return int(task.payload) + 1

        @w.handler("async")
        async def aio(task: Task) -> int:
            await asyncio.sleep(0)
            return int(task.payload) * 10

        ids = [tq.enqueue(n, queue="sync", pool="net") for n in range(3)]
        ids += [tq.enqueue(n, queue="async") for n in range(3)]
        with running(w, tq):
            assert w.listener is None, "a poll_only worker never LISTENs"
            assert w.maintainer is None, "nor holds a session advisory lock"
            assert w.signals.beaten.wait(WAIT) == 0
            beat_seen.set()
            later = tq.enqueue(5, queue="async")  # no NOTIFY reaches it: found by polling
            states = recorded(w, [*ids, later])
        assert all(states[i] == "done" for i in [*ids, later])
        assert [direct.get(i).result for i in ids] == [1, 2, 3, 0, 10, 20]  # type: ignore[union-attr]
        assert direct.get(later).result == 50  # type: ignore[union-attr]
        pool = tq.pool("net")
        assert pool is not None and pool.limit == 1 and pool.running == 0
        assert tq.stats() is not None


def test_without_poll_only_prepared_statements_break_behind_pgbouncer(bouncer: str) -> None:
    # Two clients share the one server connection; both prepare the enqueue statement under the same name.
    with TaskQueue(bouncer) as first, TaskQueue(bouncer) as second:
        first.enqueue(1, queue="q")
        with pytest.raises(DatabaseError, match="prepared statement"):
            second.enqueue(2, queue="q")
    with TaskQueue(bouncer, poll_only=True) as first, TaskQueue(bouncer, poll_only=True) as second:
        assert first.enqueue(1, queue="q") != second.enqueue(2, queue="q")


def test_a_worker_can_override_the_queues_poll_only(tq: TaskQueue) -> None:
    polling, listening = new_worker(poll_only=True, poll_interval=0.1), new_worker()
    for w in (polling, listening):
        w.handler("q", lambda task: None)
        with running(w, tq):
            task_id = tq.enqueue({}, queue="q")
            assert recorded(w, [task_id]) == {task_id: "done"}
    assert polling.listener is None
    assert listening.listener is not None and listening.listener.connects == 1


def test_the_async_api_with_poll_only_works_through_pgbouncer(bouncer: str, dsn: str) -> None:
    """Two AsyncTaskQueues share PgBouncer's one server connection: no prepared statement, search_path per
    transaction, so enqueue, claim (one-statement calls), pools, heartbeat and complete all go through."""
    from taskqueue import AsyncTaskQueue

    async def main() -> list[int]:
        async with AsyncTaskQueue(bouncer, poll_only=True) as a, AsyncTaskQueue(bouncer, poll_only=True) as b:
            await a.set_pool_limit("net", 2)
            ids = [await (a if n % 2 else b).enqueue(n, queue="q", pool="net") for n in range(6)]
            done = []
            for handle in (a, b, a, b, a, b):
                task = await handle.claim(queues=["q"])
                assert task is not None
                await handle.heartbeat(task)
                await handle.complete(task, task.payload * 2)
                done.append(task.id)
            assert await a.claim(queues=["q"]) is None
            assert sorted(done) == sorted(ids)
            return ids

    ids = asyncio.run(main())
    with TaskQueue(dsn) as direct:
        assert [direct.get(i).result for i in ids] == [0, 2, 4, 6, 8, 10]  # type: ignore[union-attr]
        assert direct.pool("net").running == 0  # type: ignore[union-attr]
