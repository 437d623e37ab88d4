"""One-statement calls on held connections (taskqueue/held.py): reused, checked, bounded by the pool, fork-safe."""

from __future__ import annotations

import multiprocessing
import threading
import time

import psycopg
import pytest

from taskqueue import DatabaseError, TaskQueue


def backend_of(tq: TaskQueue) -> int:
    """The backend pid of the connection the next one-statement call would use (taken and given back)."""
    held = tq.db._held.take()
    assert held is not None
    try:
        return int(held.driver.info.backend_pid)
    finally:
        tq.db._held.give_back(held)


def sessions(dsn: str) -> int:
    with psycopg.connect(dsn) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_stat_activity"
            " WHERE application_name = 'taskqueue' AND datname = current_database()"
        ).fetchone()
    assert row is not None
    return int(row[0])


def test_sequential_calls_share_one_held_connection_and_close_returns_it(dsn: str) -> None:
    q = TaskQueue(dsn)
    first = q.enqueue("a")
    pid = backend_of(q)
    for i in range(20):
        q.enqueue(i)
    task = q.claim()
    assert task is not None and task.id == first
    q.complete(task)
    assert backend_of(q) == pid
    assert q.engine.pool.checkedout() == 1  # held between calls, out of the pool's own count
    q.close()
    assert q.engine.pool.checkedout() == 0
    assert sessions(dsn) == 0


def test_a_held_session_the_server_ended_is_replaced_before_use(dsn: str) -> None:
    with TaskQueue(dsn) as q:
        q.enqueue("warm")
        pid = backend_of(q)
        with psycopg.connect(dsn, autocommit=True) as admin:
            admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
            deadline = time.monotonic() + 5
            while time.monotonic() < deadline:  # the server's goodbye reaches the socket asynchronously
                gone = admin.execute("SELECT count(*) FROM pg_stat_activity WHERE pid = %s", (pid,)).fetchone()
                if gone is not None and gone[0] == 0:
                    break
                time.sleep(0.01)
        tid = q.enqueue("after the kill")  # no DatabaseError: the dead session is never used
        assert q.get(tid) is not None
        assert backend_of(q) != pid


def test_a_statement_error_leaves_the_held_connection_usable(dsn: str) -> None:
    with TaskQueue(dsn) as q:
        q.enqueue("before")
        with psycopg.connect(dsn) as conn:
            conn.execute(
                "ALTER TABLE taskqueue.tasks ADD CONSTRAINT test_no_poison CHECK (payload <> '\"poison\"'::jsonb)"
            )
        pid = backend_of(q)
        with pytest.raises(DatabaseError):
            q.enqueue("poison")
        assert q.get(q.enqueue("after")) is not None
        assert backend_of(q) == pid


def test_a_small_pool_holds_nothing_and_never_waits_on_itself(dsn: str) -> None:
    """With 2 connections in all, none is held: threads mixing one-statement calls and transactions all finish."""
    errors: list[BaseException] = []
    with TaskQueue(dsn, pool_size=2, max_overflow=0) as q:

        def producer(k: int) -> None:
            try:
                for i in range(30):
                    q.enqueue([k, i])
                    if i % 10 == 0:
                        q.enqueue_many([{"payload": [k, i, j]} for j in range(3)])  # a transaction
            except BaseException as exc:  # pragma: no cover - reported below
                errors.append(exc)

        threads = [threading.Thread(target=producer, args=(k,)) for k in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert not errors and not any(t.is_alive() for t in threads)
        assert q.stats().by_state["queued"] == 6 * (30 + 3 * 3)
        assert q.engine.pool.checkedout() == 0  # nothing held


def test_concurrent_calls_use_at_most_the_held_connections_plus_the_pool(dsn: str) -> None:
    ids: list[int] = []
    lock = threading.Lock()
    with TaskQueue(dsn, pool_size=3, max_overflow=0) as q:

        def producer() -> None:
            mine = [q.enqueue(None) for _ in range(100)]
            with lock:
                ids.extend(mine)

        threads = [threading.Thread(target=producer) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert len(ids) == 800 and len(set(ids)) == 800
        assert q.engine.pool.checkedout() <= 1  # pool_size 3 - 2 left to the pool's other callers: one held
        assert sessions(dsn) <= 3


def _child_enqueues(q: TaskQueue, out: multiprocessing.Queue) -> None:  # type: ignore[type-arg]
    try:
        held = q.db._held.take()
        assert held is not None
        child_backend = held.driver.info.backend_pid
        q.db._held.give_back(held)
        q.enqueue("from the child")
        with q.engine.connect() as conn:  # the pool's own checkout, as a transaction takes one
            pooled_backend = conn.connection.driver_connection.info.backend_pid  # type: ignore[union-attr]
        q.db._held.close()
        q.engine.dispose()
        out.put(("ok", (child_backend, pooled_backend)))
    except BaseException as exc:  # pragma: no cover - reported to the parent
        out.put(("error", repr(exc)))


@pytest.mark.skipif("fork" not in multiprocessing.get_all_start_methods(), reason="needs fork")
def test_a_forked_child_neither_uses_nor_closes_the_parents_connections(dsn: str) -> None:
    with TaskQueue(dsn) as q:
        q.enqueue("from the parent")
        pid = backend_of(q)
        with q.engine.connect() as conn:
            pooled = conn.connection.driver_connection.info.backend_pid  # type: ignore[union-attr]
        assert pooled != pid
        ctx = multiprocessing.get_context("fork")
        out = ctx.Queue()
        child = ctx.Process(target=_child_enqueues, args=(q, out))
        child.start()
        status, value = out.get(timeout=60)
        child.join(60)
        assert status == "ok", value
        child_held, child_pooled = value
        assert child_held not in (pid, pooled) and child_pooled not in (pid, pooled)  # its own sessions
        q.enqueue("from the parent again")  # the parent's session survived the child's close
        assert backend_of(q) == pid
        with q.engine.connect() as conn:
            assert conn.connection.driver_connection.info.backend_pid == pooled  # type: ignore[union-attr]
        assert q.stats().by_state["queued"] == 3
