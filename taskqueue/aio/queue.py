"""``AsyncTaskQueue``: the asyncio public API, the plans of :mod:`taskqueue.api` awaited on the running loop."""

from __future__ import annotations

import asyncio
from typing import Any, TypeVar

from .. import api
from .. import migrate as _migrate
from ..db import Mode, create_engine
from ..dberrors import translated
from ..handle import QueueSettings
from ..plan import Plan, Run, advance, awaiting, first_step
from ..schema import SCHEMA_DEFAULT
from ..store.requests import Op
from .db import AsyncDatabase
from .wakeups import Wakeups

T = TypeVar("T")


class AsyncTaskQueue(QueueSettings):
    """A handle on one queue schema, for asyncio code: every ``TaskQueue`` method as a coroutine.

    Same names, arguments, errors and results as ``TaskQueue``. Safe to share
    between the tasks of one event loop; the connection pool opens on first
    use (or ``async with``), on the loop that uses it.
    """

    def __init__(
        self, dsn: str | None = None, *, schema: str = SCHEMA_DEFAULT, pool_size: int = 5, max_overflow: int = 10,
        poll_only: bool = False,
    ) -> None:
        super().__init__(dsn, schema, poll_only)
        self.db = AsyncDatabase(self.dsn, self.schema, pool_size=pool_size, max_overflow=max_overflow,
                                poll_only=poll_only)

    async def _run(self, op: Op[T], connection: Any = None, *, mode: Mode = "transaction") -> T:
        return await self.db.run(op, connection, mode=mode)

    async def _perform(self, plan: Plan[T]) -> T:
        """Await a plan's steps one after the other (see :mod:`taskqueue.plan`)."""
        step, result = first_step(plan)
        while step is not None:
            try:
                value = None
                if isinstance(step, Run):
                    value = await self.db.run(step.op, step.connection, mode=step.mode)
                else:
                    await asyncio.sleep(step.seconds)
            except Exception as exc:
                step, result = advance(plan, error=exc)
            else:
                step, result = advance(plan, value)
        return result  # type: ignore[return-value]

    # -- lifecycle ----------------------------------------------------------
    async def open(self) -> None:
        """Open the connection pool now (else on first use)."""
        await self.db.open()

    async def close(self) -> None:
        await self.db.close()

    async def __aenter__(self) -> AsyncTaskQueue:
        await self.open()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def wakeups(self) -> Wakeups:
        """An ``async with`` source of wake-ups for a consumer loop: NOTIFY of new work, or the poll timeout.

        ``await wakeups.wait(timeout)`` returns when a task was enqueued, retried,
        released or a pool got room (True), or after ``timeout`` (False).
        """
        return Wakeups(self.dsn, self.channel, poll_only=self.poll_only)

    async def migrate(self) -> None:
        """Bring the schema to the newest revision; safe to call from many processes at once.

        Alembic is synchronous: it runs on a worker thread, on a short-lived
        engine of its own, so the event loop keeps serving meanwhile.
        """
        await asyncio.to_thread(self._migrate_blocking)

    def _migrate_blocking(self) -> None:
        engine = create_engine(self.dsn, self.schema, pool_size=1, max_overflow=0)
        try:
            with translated():
                _migrate.upgrade(engine, self.schema)
        finally:
            engine.dispose()

    # -- every public method, written once in taskqueue.api ------------------
    enqueue = awaiting(api.enqueue)
    enqueue_spec = awaiting(api.enqueue_spec)
    enqueue_many = awaiting(api.enqueue_many)
    claim = awaiting(api.claim)
    claim_many = awaiting(api.claim_many)
    peek = awaiting(api.peek)
    heartbeat = awaiting(api.heartbeat)
    heartbeat_many = awaiting(api.heartbeat_many)
    complete = awaiting(api.complete)
    complete_many = awaiting(api.complete_many)
    fail = awaiting(api.fail)
    release = awaiting(api.release)
    cancel = awaiting(api.cancel)
    retry = awaiting(api.retry)
    get = awaiting(api.get)
    tasks = awaiting(api.tasks)
    set_pool_limit = awaiting(api.set_pool_limit)
    pools = awaiting(api.pools)
    pool = awaiting(api.pool)
    rescue_expired = awaiting(api.rescue_expired)
    prune = awaiting(api.prune)
    next_run_in = awaiting(api.next_run_in)
    check = awaiting(api.check)
    workers = awaiting(api.workers)
    stats = awaiting(api.stats)


__all__ = ["AsyncTaskQueue"]
