"""Async handlers: coroutines on one event loop, with their own budget.

The claim, heartbeat and completion machinery stays on its threads; only the
handlers of the queues whose handler is an ``async def`` run here, as asyncio
tasks on one loop: the worker's own (:class:`AsyncLoop`, a supervised thread,
under ``Worker.run``) or the caller's (``await Worker.run_async``). The
claimer starts no more of them than ``async_concurrency`` allows, so no
semaphore is needed here. Outcomes follow the same rules as the threads'
(:class:`~taskqueue.worker.executor.Outcomes`). Unlike a thread, a coroutine
can be stopped: a cancel request seen by the heartbeat, a lost lease and the
end of the grace period cancel its asyncio task.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import threading
from collections.abc import Callable
from typing import Any

from ..task import Task
from .capacity import ASYNC
from .executor import Outcomes
from .outcome import Report
from .service import Service, WorkerSignals

log = logging.getLogger("taskqueue.worker.executor")


def is_async_handler(fn: Any) -> bool:
    """An ``async def``, or a callable object whose ``__call__`` is one (functools.partial included)."""
    call = type(fn).__call__ if callable(fn) and not inspect.isroutine(fn) else None
    return inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(call)


class AsyncHandlers:
    """Runs async handlers as asyncio tasks on one loop; every public method but ``start`` is thread-safe.

    ``deliver`` takes each outcome (None: nothing to record): the completer's, by default, or an inline
    lane's, which writes them on the loop's own thread (see :mod:`taskqueue.worker.inline`).
    """

    def __init__(self, outcomes: Outcomes, deliver: Callable[[Task, Report | None], None] | None = None) -> None:
        self.outcomes = outcomes
        self.deliver = outcomes.deliver if deliver is None else deliver
        self.loop: asyncio.AbstractEventLoop | None = None
        self._running: dict[str, asyncio.Task[None]] = {}  # by lease token; touched on the loop only
        self._cancelled: set[str] = set()
        # Tasks submitted and not yet started; while it holds any, a call to start them is on its way to the loop.
        self._submitted: list[Task] = []
        self._lock = threading.Lock()

    def attach(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop

    def submit(self, task: Task) -> None:
        """Start ``task`` on the loop, in submission order.

        A claim hands over its tasks one by one; they are started together by
        one call on the loop, where a call per task wrote to the loop's
        wake-up pipe and woke it once a task. A cancel sent after a submit is
        still run after its start, as both go through the loop's FIFO.
        """
        with self._lock:
            first = not self._submitted
            self._submitted.append(task)
        if first and not self._call(self._start_submitted):
            with self._lock:
                self._submitted.clear()

    def _start_submitted(self) -> None:
        with self._lock:
            tasks, self._submitted = self._submitted, []
        for task in tasks:
            self.start(task)

    def cancel(self, task: Task) -> None:
        """Cancel the handler of ``task`` if it is one of ours and still running (a no-op otherwise)."""
        self._call(self._cancel, task)

    def cancel_all(self) -> None:
        self._call(self._cancel_all)

    def pending(self) -> list[asyncio.Task[None]]:
        """The handler tasks not finished yet (on the loop's thread)."""
        return [t for t in self._running.values() if not t.done()]

    # -- on the loop ----------------------------------------------------------
    def _call(self, fn: Any, *args: Any) -> bool:
        loop = self.loop
        if loop is not None and not loop.is_closed():
            try:
                loop.call_soon_threadsafe(fn, *args)
                return True
            except RuntimeError:  # closed since the look above
                pass
        log.warning("async handlers: no event loop to run on", extra={"worker": self.outcomes.worker})
        return False

    def start(self, task: Task) -> asyncio.Task[None]:
        """Create the handler's asyncio task, on the loop's own thread (running or not); it runs with the loop."""
        assert self.loop is not None
        key = str(task.lease_token)
        running = self.loop.create_task(self._run(task, key), name=f"taskqueue-task-{task.id}")
        self._running[key] = running
        running.add_done_callback(lambda t: self._never_ran(task, key, t))
        return running

    def _never_ran(self, task: Task, key: str, running: asyncio.Task[None]) -> None:
        """A task cancelled before its first step never enters ``_run``: end its claim here (nothing to record)."""
        if self._running.get(key) is running:
            self._running.pop(key, None)
            self._cancelled.discard(key)
            self.deliver(task, None)

    def _cancel(self, task: Task) -> None:
        key = str(task.lease_token)
        running = self._running.get(key)
        if running is not None and key not in self._cancelled:
            self._cancelled.add(key)
            running.cancel()

    def _cancel_all(self) -> None:
        for running in self._running.values():
            running.cancel()

    async def _run(self, task: Task, key: str) -> None:
        outcomes = self.outcomes
        report = None
        try:
            begun = outcomes.begin(task)
            if begun is None:  # lost (or given back) while it waited for the loop: not run
                return
            report, handler, started = begun
            if handler is not None:
                try:
                    report.result = await handler(task)
                except BaseException as exc:  # CancelledError included: ours to turn into an outcome
                    outcomes.raised(report, exc)
            report = outcomes.end(report, started, ASYNC)
        except Exception:  # pragma: no cover - the outcome rules handle their own errors
            log.exception("unexpected error around task %s", task.id, extra={"worker": outcomes.worker})
            report = None
        finally:
            self._running.pop(key, None)
            self._cancelled.discard(key)
            self.deliver(task, report)


def async_runner(
    outcomes: Outcomes,
    sync_submit: Callable[[Task], None],
    async_queues: list[str],
    loop: asyncio.AbstractEventLoop | None,
) -> tuple[AsyncHandlers | None, Callable[[Task], None]]:
    """The runner of async handlers (None without any), and the claimer's ``submit``, routing by queue.

    ``sync_submit`` takes the other queues' tasks: the handler threads', or an inline lane's.
    """
    if not async_queues:
        return None, sync_submit
    handlers = AsyncHandlers(outcomes)
    if loop is not None:
        handlers.attach(loop)
    aio = frozenset(async_queues)

    def submit(task: Task) -> None:
        (handlers.submit if task.queue in aio else sync_submit)(task)

    return handlers, submit


class AsyncLoop(Service):
    """The worker's own event loop, on a thread of its own, for ``Worker.run``."""

    join_timeout = 5.0

    def __init__(self, handlers: AsyncHandlers, *, worker: str, signals: WorkerSignals | None = None) -> None:
        super().__init__("async-loop", worker=worker, signals=signals)
        self.handlers = handlers
        self.loop: asyncio.AbstractEventLoop | None = None

    def start(self) -> None:
        # The loop exists before its thread runs, so the claimer can submit at once.
        if self.loop is None or self.loop.is_closed():
            self.loop = asyncio.new_event_loop()
            self.handlers.attach(self.loop)
        super().start()

    def interrupt(self) -> None:
        loop = self.loop
        if loop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(loop.stop)

    def run(self) -> None:
        loop = self.loop
        assert loop is not None
        asyncio.set_event_loop(loop)
        try:
            if not self.stopping:
                loop.run_forever()
        finally:
            # Whatever still runs was given back at shutdown (or its worker is gone): cancel it.
            pending = self.handlers.pending()
            for t in pending:
                t.cancel()
            if pending:
                loop.run_until_complete(asyncio.wait(pending, timeout=self.join_timeout))
            loop.run_until_complete(loop.shutdown_asyncgens())
            loop.close()


async def run_in_loop(
    run: Callable[[asyncio.AbstractEventLoop], None],
    *,
    stop: Callable[..., None],
    handlers: Callable[[], AsyncHandlers | None],
    release: Callable[[], None],
) -> None:
    """``Worker.run_async``: ``run(loop)`` on a thread of its own while this loop runs the async handlers.

    A cancellation of the awaiting task calls ``stop()`` and waits for the
    graceful end; a second one calls ``stop(now=True)``. ``release`` runs on
    that thread once ``run`` has returned (the worker's run lock).
    """
    loop = asyncio.get_running_loop()
    done: asyncio.Future[None] = loop.create_future()

    def settle(error: BaseException | None) -> None:
        if done.done():
            return
        if error is None:
            done.set_result(None)
        else:
            done.set_exception(error)

    def target() -> None:
        error: BaseException | None = None
        try:
            run(loop)
        except BaseException as exc:
            error = exc
        finally:
            release()
        with contextlib.suppress(RuntimeError):  # the loop is closed: nobody is waiting any more
            loop.call_soon_threadsafe(settle, error)

    threading.Thread(target=target, name="taskqueue-worker", daemon=True).start()
    try:
        await asyncio.shield(done)
    except asyncio.CancelledError:
        stop()
        while not done.done():
            try:
                await asyncio.shield(done)
            except asyncio.CancelledError:
                stop(now=True)
        if not done.cancelled():
            done.exception()  # retrieved: the cancellation is what the caller asked for
        raise
    finally:
        await _finish(handlers())


async def _finish(handlers: AsyncHandlers | None) -> None:
    """Cancel and await what is left of the handlers on this loop (given back at shutdown)."""
    if handlers is None:
        return
    pending = handlers.pending()
    for t in pending:
        t.cancel()
    if pending:
        await asyncio.wait(pending, timeout=AsyncLoop.join_timeout)
