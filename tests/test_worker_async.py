"""Async handlers in the Worker: outcomes, budgets, leases, cancellation, shutdown, and ``run_async``.

Handlers signal with events; tests wait on ``Worker.signals`` or on those
events, never on sleeps. ``running`` and ``new_worker`` are the worker tests'.
"""

from __future__ import annotations

import asyncio
import functools
import signal
import threading
from typing import Any

import pytest

from taskqueue import Permanent, Retry, Task, TaskQueue, ValidationError, Worker
from taskqueue.worker.capacity import ASYNC, SYNC
from tests.support.polling import wait_for
from tests.test_worker import WAIT, new_worker, recorded, running


class Gate:
    """An asyncio.Event that a test thread can open (the handlers' loop is another thread's)."""

    def __init__(self) -> None:
        self.loop: asyncio.AbstractEventLoop | None = None
        self.event: asyncio.Event | None = None

    async def wait(self) -> None:
        if self.event is None:
            self.loop, self.event = asyncio.get_running_loop(), asyncio.Event()
        await self.event.wait()

    def open(self) -> None:
        assert self.loop is not None and self.event is not None
        self.loop.call_soon_threadsafe(self.event.set)


def test_async_settings_validate() -> None:
    assert Worker().effective_async_concurrency == 100
    assert Worker(async_concurrency=7).effective_async_concurrency == 7
    assert Worker().configure(async_concurrency=3).async_concurrency == 3
    for bad in (0, -1, 1.5, "2"):
        with pytest.raises(ValidationError):
            Worker(async_concurrency=bad)  # type: ignore[arg-type]


def test_outcomes_of_async_handlers(tq: TaskQueue) -> None:
    w = new_worker()
    loops: set[int] = set()

    @w.handler("ok")
    async def ok(task: Task) -> Any:
        loops.add(id(asyncio.get_running_loop()))
        await asyncio.sleep(0)
        return {"echo": task.payload}

    @w.handler("boom")
    async def boom(task: Task) -> Any:
        raise ValueError("broken input")

    @w.handler("retry")
    async def retry(task: Task) -> Any:
        if task.attempts == 1:
            raise Retry(in_=0)
        return "second time lucky"

    @w.handler("permanent")
    async def permanent(task: Task) -> Any:
        raise Permanent("will never work")

    class Callable:
        async def __call__(self, task: Task) -> Any:
            loops.add(id(asyncio.get_running_loop()))
            return "object"

    w.handler("object", Callable())
    w.handler("partial", functools.partial(ok))

    ids = {
        "ok": tq.enqueue({"a": 1}, queue="ok"),
        "boom": tq.enqueue({}, queue="boom", max_attempts=1),
        "retry": tq.enqueue({}, queue="retry", max_attempts=2),
        "permanent": tq.enqueue({}, queue="permanent", max_attempts=5),
        "object": tq.enqueue({}, queue="object"),
        "partial": tq.enqueue({"b": 2}, queue="partial"),
    }
    with running(w, tq):
        recorded(w, ids.values(), states=("done", "failed"))
    tasks = {name: tq.get(task_id) for name, task_id in ids.items()}
    assert tasks["ok"].state == "done" and tasks["ok"].result == {"echo": {"a": 1}}  # type: ignore[union-attr]
    assert tasks["boom"].state == "failed" and "ValueError: broken input" in tasks["boom"].error  # type: ignore
    assert tasks["retry"].state == "done" and tasks["retry"].attempts == 2  # type: ignore[union-attr]
    assert tasks["permanent"].state == "failed" and tasks["permanent"].attempts == 1  # type: ignore[union-attr]
    assert tasks["object"].result == "object" and tasks["partial"].result == {"echo": {"b": 2}}  # type: ignore
    assert len(loops) == 1, "every async handler runs on the one loop of the worker"
    assert w.capacity_state is not None and w.capacity_state.peak_threads == 0, "no handler thread was used"


def test_cancel_request_cancels_the_coroutine(tq: TaskQueue) -> None:
    w = new_worker(lease=0.3)  # a heartbeat every 0.1 s
    started = threading.Event()
    seen: list[BaseException] = []

    @w.handler("slow")
    async def slow(task: Task) -> None:
        started.set()
        try:
            await asyncio.Event().wait()  # forever, unless cancelled
        except asyncio.CancelledError as exc:
            seen.append(exc)
            raise

    task_id = tq.enqueue({}, queue="slow", max_attempts=5)
    with running(w, tq):
        assert started.wait(WAIT)
        assert tq.cancel(task_id)
        assert recorded(w, [task_id]) == {task_id: "cancelled"}
    task = tq.get(task_id)
    assert task is not None and task.state == "cancelled" and task.error == "cancelled on request"
    assert len(seen) == 1


def test_sync_and_async_handlers_keep_their_own_budgets(tq: TaskQueue) -> None:
    w = new_worker(concurrency=2, async_concurrency=3)
    lock = threading.Lock()
    now = {SYNC: 0, ASYNC: 0}
    peak = {SYNC: 0, ASYNC: 0}
    sync_gate, async_gate = threading.Event(), Gate()

    def enter(kind: str) -> None:
        with lock:
            now[kind] += 1  # type: ignore[index]
            peak[kind] = max(peak[kind], now[kind])  # type: ignore[index]

    def leave(kind: str) -> None:
        with lock:
            now[kind] -= 1  # type: ignore[index]

    @w.handler("threads")
    def threads(task: Task) -> None:
        enter(SYNC)
        sync_gate.wait(WAIT)
        leave(SYNC)

    @w.handler("coroutines")
    async def coroutines(task: Task) -> None:
        enter(ASYNC)
        await async_gate.wait()
        leave(ASYNC)

    ids = [tq.enqueue({}, queue="threads") for _ in range(5)]
    ids += [tq.enqueue({}, queue="coroutines") for _ in range(8)]
    with running(w, tq):
        assert wait_for(lambda: now[SYNC] == 2 and now[ASYNC] == 3)
        capacity = w.capacity_state
        assert capacity is not None
        assert capacity.threads_busy(ASYNC) == 3, "no async claim beyond what the async budget can start"
        sync_gate.set()
        async_gate.open()
        states = recorded(w, ids)
    assert all(states[i] == "done" for i in ids)
    assert peak == {SYNC: 2, ASYNC: 3}
    assert capacity.peak_busy[ASYNC] == 3


def test_heartbeats_extend_the_lease_of_a_long_async_handler(tq: TaskQueue) -> None:
    w = new_worker(lease=0.3)
    gate, started = Gate(), threading.Event()

    @w.handler("long")
    async def long(task: Task) -> str:
        started.set()
        await gate.wait()
        return "finished"

    task_id = tq.enqueue({}, queue="long", max_attempts=1)
    with running(w, tq):
        assert started.wait(WAIT)
        first = tq.get(task_id).lease_expires_at  # type: ignore[union-attr]
        beats = [w.signals.beaten.wait(WAIT) for _ in range(6)]  # two whole leases' worth
        assert beats == [0] * 6, "no lease lost"
        assert tq.get(task_id).lease_expires_at > first  # type: ignore[operator,union-attr]
        gate.open()
        assert recorded(w, [task_id]) == {task_id: "done"}
    assert tq.get(task_id).result == "finished"  # type: ignore[union-attr]


def test_shutdown_gives_back_unfinished_async_claims(tq: TaskQueue) -> None:
    w = new_worker(grace=0.2)
    started = threading.Event()
    cancelled = threading.Event()

    @w.handler("stuck")
    async def stuck(task: Task) -> None:
        started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.set()
            raise

    task_id = tq.enqueue({}, queue="stuck", max_attempts=3)
    with running(w, tq):
        assert started.wait(WAIT)
        w.stop()  # graceful: the grace period, then the claim goes back
        assert wait_for(lambda: not w.running)
    task = tq.get(task_id)
    assert task is not None and task.state == "queued" and task.attempts == 0
    assert "given back by worker" in (task.error or "")
    assert cancelled.is_set(), "the given-back coroutine was cancelled"


# -- run_async ----------------------------------------------------------------
async def _ready(worker: Worker) -> None:
    assert await asyncio.to_thread(worker.ready.wait, WAIT), "worker did not become ready"


def test_run_async_on_the_callers_loop_and_cancelled_gracefully(tq: TaskQueue) -> None:
    w = new_worker(grace=WAIT)
    w.signals.init()
    handler_loops: list[asyncio.AbstractEventLoop] = []
    in_handler = threading.Event()
    finish: asyncio.Event | None = None
    handlers_before = signal.getsignal(signal.SIGTERM)

    @w.handler("web")
    async def web(task: Task) -> str:
        handler_loops.append(asyncio.get_running_loop())
        assert finish is not None
        in_handler.set()
        await finish.wait()
        return "finished during the grace period"

    async def main() -> asyncio.AbstractEventLoop:
        nonlocal finish
        finish = asyncio.Event()
        run = asyncio.create_task(w.run_async(tq))
        await _ready(w)
        assert signal.getsignal(signal.SIGTERM) is handlers_before, "run_async installed no signal handler"
        task_id = tq.enqueue({}, queue="web")
        assert await asyncio.to_thread(in_handler.wait, WAIT)
        run.cancel()  # a graceful stop: the running handler may finish within the grace period
        assert await asyncio.to_thread(wait_for, lambda: not w.running)  # winding down, handler still running
        finish.set()
        with pytest.raises(asyncio.CancelledError):
            await run
        assert tq.get(task_id).state == "done"  # type: ignore[union-attr]
        return asyncio.get_running_loop()

    loop = asyncio.run(main())
    assert handler_loops == [loop]
    assert not w.running
    assert w._run_lock.acquire(blocking=False), "the run lock was released"
    w._run_lock.release()


def test_run_async_ends_on_stop(tq: TaskQueue) -> None:
    w = new_worker()
    w.signals.init()

    @w.handler("web")
    async def web(task: Task) -> int:
        return int(task.payload["n"]) * 2

    async def main() -> None:
        run = asyncio.create_task(w.run_async(tq))
        await _ready(w)
        ids = [tq.enqueue({"n": n}, queue="web") for n in range(20)]
        await asyncio.to_thread(recorded, w, ids)
        w.stop()
        await asyncio.wait_for(run, WAIT)  # returns normally, no CancelledError
        assert [tq.get(i).result for i in ids] == [n * 2 for n in range(20)]  # type: ignore[union-attr]

    asyncio.run(main())
    assert not w.running


def test_run_async_twice_at_once_is_refused(tq: TaskQueue) -> None:
    w = new_worker()
    w.handler("q", lambda task: None)

    async def main() -> None:
        run = asyncio.create_task(w.run_async(tq))
        await _ready(w)
        with pytest.raises(Exception, match="already running"):
            await w.run_async(tq)
        w.stop()
        await run

    asyncio.run(main())
