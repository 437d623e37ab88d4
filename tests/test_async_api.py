"""What only the asyncio front-end has: its own pool, the caller's AsyncConnection, cancellation, one source.

The contract itself (enqueue, claim, pools, leases, retries, checks) runs
against both APIs through tests/support/apis.py.
"""

from __future__ import annotations

import asyncio
import inspect
import multiprocessing
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import psycopg
import pytest
import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncSession, create_async_engine

from taskqueue import AsyncTaskQueue, TaskQueue, ValidationError
from taskqueue.dsn import to_sqlalchemy_url
from tests.support.apis import PUBLIC
from tests.support.polling import sql, wait_for

T = TypeVar("T")


def run(dsn: str, body: Callable[[AsyncTaskQueue], Awaitable[T]], **options: Any) -> T:
    async def main() -> T:
        async with AsyncTaskQueue(dsn, **options) as atq:
            return await body(atq)

    return asyncio.run(main())


def our_sessions(dsn: str) -> list[tuple[Any, ...]]:
    """(state, query) of the queue's own sessions on this database."""
    return sql(
        dsn,
        "SELECT state, query FROM pg_stat_activity WHERE application_name = 'taskqueue'"
        " AND datname = current_database() AND pid <> pg_backend_pid()",
    )


# -- one source of truth ------------------------------------------------------
def test_both_apis_have_the_same_methods_signatures_and_docs() -> None:
    sync_public = {
        name for name, value in vars(TaskQueue).items() if not name.startswith("_") and callable(value)
    }
    # transaction() hands out a sync Connection; the async API takes the caller's AsyncConnection instead.
    assert sync_public - set(PUBLIC) == {"close", "transaction"}
    assert "migrate" in PUBLIC and "enqueue" in PUBLIC and "stats" in PUBLIC and len(PUBLIC) == 26
    for name in PUBLIC:
        sync_method, async_method = getattr(TaskQueue, name), getattr(AsyncTaskQueue, name)
        assert inspect.iscoroutinefunction(async_method), name
        assert inspect.signature(sync_method) == inspect.signature(async_method), name
        assert sync_method.__doc__ == async_method.__doc__ or name == "migrate", name


def test_bad_input_is_refused_before_a_connection_is_taken(dsn: str) -> None:
    async def body(atq: AsyncTaskQueue) -> None:
        with pytest.raises(ValidationError, match="priority"):
            await atq.enqueue("x", priority="high")  # type: ignore[arg-type]
        with pytest.raises(ValidationError, match="available"):
            await atq.claim(available=-1)
        assert atq.db.pool.get_stats().get("requests_num", 0) == 0

    run(dsn, body)
    assert sql(dsn, "SELECT count(*) FROM taskqueue.tasks") == [(0,)]


def test_the_pool_opens_on_first_use_without_async_with(dsn: str) -> None:
    async def main() -> int:
        atq = AsyncTaskQueue(dsn)
        try:
            return await atq.enqueue("lazy")
        finally:
            await atq.close()

    task_id = asyncio.run(main())
    assert sql(dsn, "SELECT payload::text FROM taskqueue.tasks WHERE id = %s", task_id) == [('"lazy"',)]


def test_pooled_session_killed_while_idle_is_replaced(dsn: str) -> None:
    async def body(atq: AsyncTaskQueue) -> int:
        await atq.enqueue("warm")
        killed = sql(
            dsn,
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = 'taskqueue'"
            " AND datname = current_database() AND pid <> pg_backend_pid()",
        )[0][0]
        assert killed >= 1
        assert wait_for(lambda: not our_sessions(dsn), timeout=5)
        return await asyncio.wait_for(atq.enqueue("after the kill"), 10)

    assert run(dsn, body) > 1


# -- the caller's transaction ----------------------------------------------
@pytest.mark.parametrize("outcome", ["commit", "rollback"])
def test_enqueue_and_complete_commit_with_the_callers_async_connection(dsn: str, outcome: str) -> None:
    engine = create_async_engine(to_sqlalchemy_url(dsn))

    async def body(atq: AsyncTaskQueue) -> None:
        await atq.enqueue("claim me", queue="work")
        task = await atq.claim(queues=["work"])
        assert task is not None
        async with engine.connect() as conn:
            await conn.execute(sa.text("CREATE TABLE IF NOT EXISTS public.orders (id int)"))
            await conn.commit()
            await conn.execute(sa.text("INSERT INTO public.orders VALUES (1)"))
            await atq.enqueue("with the order", queue="mail", connection=conn)
            await atq.complete(task, {"ok": True}, connection=conn)
            path = (await conn.execute(sa.text("SHOW search_path"))).scalar_one()
            assert "taskqueue" not in path  # ours only while our statements ran
            if outcome == "commit":
                await conn.commit()
            else:
                await conn.rollback()
        await engine.dispose()

    run(dsn, body)
    committed = outcome == "commit"
    assert sql(dsn, "SELECT count(*) FROM public.orders") == [(int(committed),)]
    assert sql(dsn, "SELECT count(*) FROM taskqueue.tasks WHERE queue = 'mail'") == [(int(committed),)]
    assert sql(dsn, "SELECT state FROM taskqueue.tasks WHERE queue = 'work'") == [("done" if committed else "running",)]


def test_enqueue_with_an_async_session_and_bad_input_leaves_the_callers_transaction_usable(dsn: str) -> None:
    engine = create_async_engine(to_sqlalchemy_url(dsn))

    async def body(atq: AsyncTaskQueue) -> None:
        async with AsyncSession(engine) as session, session.begin():
            with pytest.raises(ValidationError):
                await atq.enqueue("x", required=-5, connection=session)
            await atq.enqueue("in the session", connection=session)
            with pytest.raises(ValidationError, match="AsyncConnection or AsyncSession"):
                await atq.enqueue("x", connection=object())  # type: ignore[arg-type]
        await engine.dispose()

    run(dsn, body)
    assert sql(dsn, "SELECT payload::text FROM taskqueue.tasks") == [('"in the session"',)]


def test_a_sync_connection_is_refused_by_the_async_api_with_a_clear_error(dsn: str) -> None:
    engine = sa.create_engine(to_sqlalchemy_url(dsn))

    async def body(atq: AsyncTaskQueue) -> None:
        with engine.connect() as conn, pytest.raises(ValidationError, match="AsyncConnection"):
            await atq.enqueue("x", connection=conn)

    run(dsn, body)
    engine.dispose()
    assert sql(dsn, "SELECT count(*) FROM taskqueue.tasks") == [(0,)]


# -- cancellation ---------------------------------------------------------------
@pytest.mark.parametrize("call", ["complete", "set_pool_limit"])
def test_cancelling_an_awaiting_call_leaks_no_connection_and_no_transaction(dsn: str, call: str) -> None:
    """The call waits on a row lock held elsewhere; cancelled, its session ends up idle (or gone), never in a
    transaction, the lock waiter is gone, the pool gives the connection back, and the next call works."""

    async def body(atq: AsyncTaskQueue) -> None:
        await atq.enqueue("held", pool="net-1")
        task = await atq.claim()
        assert task is not None
        holder = await psycopg.AsyncConnection.connect(dsn)
        table = "pools" if call == "set_pool_limit" else "tasks"
        await holder.execute(f"SELECT 1 FROM taskqueue.{table} FOR UPDATE")  # noqa: S608 - a fixed name
        pending = asyncio.ensure_future(
            atq.complete(task) if call == "complete" else atq.set_pool_limit("net-1", 3)
        )
        waiting = "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'taskqueue' AND wait_event_type = 'Lock'"
        for _ in range(500):
            if (await (await holder.execute(waiting)).fetchone())[0]:  # type: ignore[index]
                break
            await asyncio.sleep(0.01)
        else:
            pytest.fail("the call never waited on the lock")
        pending.cancel()
        with pytest.raises(asyncio.CancelledError):
            await pending
        await holder.rollback()
        for _ in range(500):
            states = [state for state, _query in our_sessions(dsn)]
            if all(state == "idle" for state in states):
                break
            await asyncio.sleep(0.01)
        assert all(state == "idle" for state in states), states
        stats = atq.db.pool.get_stats()
        assert stats["pool_available"] == stats["pool_size"], stats  # every connection is back
        assert (await atq.get(task.id)).state == "running"  # type: ignore[union-attr]  # nothing half-done
        await atq.complete(task)
        assert (await atq.get(task.id)).state == "done"  # type: ignore[union-attr]
        await holder.close()

    run(dsn, body)


# -- behind PgBouncer ---------------------------------------------------------
def test_poll_only_prepares_no_statement(dsn: str) -> None:
    async def body(atq: AsyncTaskQueue) -> int:
        for _ in range(8):
            await atq.enqueue("x")
            task = await atq.claim()
            assert task is not None
            await atq.complete(task)
        async with atq.db.pool.connection() as conn:
            row = await (await conn.execute("SELECT count(*) FROM pg_prepared_statements")).fetchone()
        return int(row[0])  # type: ignore[index]

    assert run(dsn, body, poll_only=True) == 0
    assert run(dsn, body) > 0  # the default prepares the hot statements


# -- async and sync consumers on one queue ------------------------------------
def _sync_consumer(dsn: str, out: Any) -> None:
    claimed = []
    with TaskQueue(dsn) as tq:
        while (task := tq.claim(queues=["mixed"])) is not None:
            claimed.append(task.id)
            tq.complete(task)
    out.put(claimed)


def _async_consumer(dsn: str, out: Any) -> None:
    async def lane(atq: AsyncTaskQueue) -> list[int]:
        claimed = []
        while (task := await atq.claim(queues=["mixed"])) is not None:
            claimed.append(task.id)
            await atq.complete(task)
        return claimed

    async def main() -> list[int]:
        async with AsyncTaskQueue(dsn) as atq:
            lanes = await asyncio.gather(*(lane(atq) for _ in range(4)))
        return [task_id for claimed in lanes for task_id in claimed]

    out.put(asyncio.run(main()))


@pytest.mark.slow
def test_async_and_sync_consumers_never_claim_a_task_twice(dsn: str) -> None:
    with TaskQueue(dsn) as tq:
        ids = tq.enqueue_many([{"payload": i, "queue": "mixed", "priority": i % 7} for i in range(3000)])
    ctx = multiprocessing.get_context("spawn")
    out = ctx.Queue()
    procs = [ctx.Process(target=target, args=(dsn, out)) for target in (_sync_consumer, _async_consumer) * 2]
    for proc in procs:
        proc.start()
    results = [out.get(timeout=240) for _ in procs]
    for proc in procs:
        proc.join(timeout=60)
        assert proc.exitcode == 0
    claimed = [task_id for result in results for task_id in result]
    assert len(claimed) == len(set(claimed)) == len(ids)
    assert set(claimed) == set(ids)
    assert all(results), "every consumer, sync and async, claimed some"
    assert sql(dsn, "SELECT state, count(*) FROM taskqueue.tasks GROUP BY state") == [("done", 3000)]


# -- wake-ups -------------------------------------------------------------------
def test_wakeups_come_from_notify_survive_a_killed_connection_and_fall_back_to_polling(dsn: str) -> None:
    async def body(atq: AsyncTaskQueue) -> None:
        async with atq.wakeups() as wakeups:
            await asyncio.wait_for(wakeups.listening.wait(), 10)
            assert await wakeups.wait(10)  # the connection's own first wake-up
            assert not await wakeups.wait(0.2)  # nothing happened: the poll timeout
            await asyncio.to_thread(_enqueue_elsewhere, dsn)
            assert await wakeups.wait(10)  # the NOTIFY of that enqueue
            killed = sql(dsn, "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity"
                              " WHERE application_name = 'taskqueue-listener' AND datname = current_database()")
            assert killed == [(1,)]
            for _ in range(500):
                if wakeups.connects == 2 and wakeups.listening.is_set():
                    break
                await asyncio.sleep(0.01)
            assert wakeups.connects == 2
            assert await wakeups.wait(10)  # woken on reconnection: notifications may have been lost meanwhile
            await asyncio.to_thread(_enqueue_elsewhere, dsn)
            assert await wakeups.wait(10)
        listeners = "SELECT 1 FROM pg_stat_activity WHERE application_name = 'taskqueue-listener'"
        assert wait_for(lambda: not sql(dsn, listeners + " AND datname = current_database()"), timeout=5)

    run(dsn, body)


def test_poll_only_wakeups_never_listen(dsn: str) -> None:
    async def body(atq: AsyncTaskQueue) -> None:
        async with atq.wakeups() as wakeups:
            await asyncio.to_thread(_enqueue_elsewhere, dsn)
            assert not await wakeups.wait(0.3)  # only the poll
            assert wakeups.connects == 0 and not wakeups.listening.is_set()

    run(dsn, body, poll_only=True)


def _enqueue_elsewhere(dsn: str) -> None:
    with TaskQueue(dsn) as tq:
        tq.enqueue("new work")
