"""Both public APIs behind one face, so the contract tests run against each.

``tq`` in a module that imports :func:`tq` from here is the sync ``TaskQueue``,
then an ``AsyncTaskQueue`` whose coroutines run on an event loop in a
background thread: every public method of the contract goes through the
async front-end, and everything else (the engine, ``transaction()``, the
sync runner the tests use to look at tables) is the sync handle's.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from taskqueue import AsyncTaskQueue, TaskQueue

#: The methods both front-ends share (the plans of taskqueue.api), plus migrate.
PUBLIC = [
    name
    for name in dir(AsyncTaskQueue)
    if not name.startswith("_") and inspect.iscoroutinefunction(getattr(AsyncTaskQueue, name))
    and name not in ("open", "close")
]


class LoopThread:
    """An event loop on a daemon thread; ``call`` runs a coroutine there and waits for it."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="async-api", daemon=True)
        self.thread.start()

    def call(self, coroutine: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(timeout=120)

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=10)
        self.loop.close()


class ThroughAsync:
    """A TaskQueue whose public methods are the AsyncTaskQueue's, awaited on a loop thread."""

    def __init__(self, sync: TaskQueue, loop: LoopThread) -> None:
        self._sync = sync
        self._loop = loop
        self.aq = AsyncTaskQueue(sync.dsn, schema=sync.schema)
        self.counters = self.aq.counters

    def __getattr__(self, name: str) -> Any:
        if name in PUBLIC:
            method: Callable[..., Any] = getattr(self.aq, name)

            @functools.wraps(method)
            def call(*args: Any, **kwargs: Any) -> Any:
                return self._loop.call(method(*args, **kwargs))

            return call
        return getattr(self._sync, name)

    def close(self) -> None:
        self._loop.call(self.aq.close())
        self._sync.close()


@pytest.fixture(params=["sync", "async"])
def tq(request: pytest.FixtureRequest, dsn: str) -> Iterator[Any]:
    """The contract's queue: the sync TaskQueue, then the AsyncTaskQueue through a loop thread."""
    sync = TaskQueue(dsn)
    if request.param == "sync":
        with sync:
            yield sync
        return
    loop = LoopThread()
    handle = ThroughAsync(sync, loop)
    try:
        yield handle
    finally:
        handle.close()
        loop.close()
