"""Hot statements reuse their connection's cursors (taskqueue/cursors.py), on our own connections only."""

from __future__ import annotations

import asyncio

import psycopg
import pytest

from taskqueue import AsyncTaskQueue, DatabaseError, TaskQueue
from taskqueue.cursors import _ATTR as ATTR
from taskqueue.cursors import AsyncCursors, Cursors


def held_driver(q: TaskQueue) -> psycopg.Connection:
    held = q.db._held.take()
    assert held is not None
    q.db._held.give_back(held)
    return held.driver


def test_claims_and_completions_on_a_held_connection_share_its_two_cursors(dsn: str) -> None:
    with TaskQueue(dsn) as q:
        driver = held_driver(q)
        assert getattr(driver, ATTR, None) is None  # made on the first hot statement, not before
        ids = [q.enqueue(i, priority=i) for i in range(5)]
        assert held_driver(q) is driver
        first = q.claim()
        assert first is not None and first.id == ids[0]
        q.complete(first, {"n": 0})
        cursors = getattr(driver, ATTR)
        assert isinstance(cursors, Cursors)
        for expected in ids[1:]:
            task = q.claim()
            assert task is not None and task.id == expected and task.payload == expected - ids[0]
            q.complete(task)
            assert getattr(driver, ATTR) is cursors
        assert held_driver(q) is driver
        assert q.get(first.id).result == {"n": 0}  # type: ignore[union-attr]
        assert q.claim() is None


def test_after_a_hot_statement_fails_the_same_cursors_serve_the_next_call(dsn: str) -> None:
    with TaskQueue(dsn) as q:
        q.enqueue("before")
        driver = held_driver(q)
        cursors = getattr(driver, ATTR)
        with psycopg.connect(dsn) as conn:
            conn.execute("ALTER TABLE taskqueue.tasks ADD CONSTRAINT test_no_poison"
                         " CHECK (payload <> '\"poison\"'::jsonb)")
        with pytest.raises(DatabaseError):
            q.enqueue("poison")
        after = q.enqueue("after")
        assert held_driver(q) is driver and getattr(driver, ATTR) is cursors
        claimed = [q.claim(), q.claim()]
        assert [t.payload for t in claimed if t is not None] == ["before", "after"]
        assert claimed[1] is not None and claimed[1].id == after


def test_a_callers_connection_is_given_no_cursors_of_ours(dsn: str) -> None:
    with TaskQueue(dsn) as q, q.engine.connect() as conn:
        task_id = q.enqueue("mine", connection=conn)
        conn.commit()
        driver = conn.connection.driver_connection
        assert getattr(driver, ATTR, None) is None
        assert q.get(task_id) is not None


def test_the_async_pools_connections_reuse_their_cursors(dsn: str) -> None:
    async def main() -> tuple[int, int, list[int]]:
        async with AsyncTaskQueue(dsn, pool_size=1, max_overflow=0) as atq:
            ids = [await atq.enqueue(i) for i in range(3)]
            async with atq.db.pool.connection() as conn:
                cursors = getattr(conn, ATTR)
                assert isinstance(cursors, AsyncCursors)
            taken = []
            for _ in ids:
                task = await atq.claim()
                assert task is not None
                await atq.complete(task)
                taken.append(task.id)
            async with atq.db.pool.connection() as conn:
                assert getattr(conn, ATTR) is cursors  # one connection in the pool: the same two cursors
            return ids[0], len(taken), taken

    first, n, taken = asyncio.run(main())
    assert n == 3 and taken == [first, first + 1, first + 2]
