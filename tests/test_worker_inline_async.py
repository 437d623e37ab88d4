"""Async handlers in the inline lane (``Worker(inline=True)`` under ``run``): one thread, no loop thread.

The coroutines at the head of a batch start together on the lane's own
event loop, on the claimer's thread; their outcomes are written from there.
Checked here: they overlap within a group, sync and async queues share the
lane, an urgent task joins a running group, a stop lets the group in hand
finish and claims no more, the grace period cancels a coroutine that outlasts
it, and a coroutine cancelled before its first step still ends its claim.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from taskqueue import Task, TaskQueue
from taskqueue.worker.aio import AsyncHandlers
from taskqueue.worker.capacity import ASYNC, Capacity
from taskqueue.worker.completer import Completer
from taskqueue.worker.executor import Outcomes
from tests.support.polling import sql, wait_for
from tests.test_worker import WAIT, new_worker, recorded, running
from tests.test_worker_inline import _until_an_empty_round, run_two_inline_processes, start_warmed_up


def test_coroutines_of_a_group_overlap_on_the_claimer_thread(tq: TaskQueue) -> None:
    """20 coroutines that each wait for all 20 to have started: they can only finish if they run together."""
    worker = new_worker(inline=True, async_concurrency=20)
    threads: set[str] = set()
    started: list[int] = []
    gate: dict[str, asyncio.Event] = {}

    @worker.handler("default")
    async def handle(task: Task) -> Any:
        threads.add(threading.current_thread().name)
        if task.payload == "warm-up":
            return None
        event = gate.setdefault("all", asyncio.Event())
        started.append(task.id)
        if len(started) == 20:
            event.set()
        await asyncio.wait_for(event.wait(), WAIT)
        return {"n": len(started)}

    warm = tq.enqueue("warm-up")
    with running(worker, tq):
        recorded(worker, [warm])
        _until_an_empty_round(worker)
        ids = tq.enqueue_many([{"payload": i} for i in range(20)])
        seen = recorded(worker, ids)
        names = {t.name for t in threading.enumerate()}
    assert {seen[i] for i in ids} == {"done"}
    assert threads == {"taskqueue-claimer"}
    assert not any("async-loop" in name for name in names), names
    results = [r for (r,) in sql(tq.dsn, "SELECT result FROM taskqueue.tasks WHERE id = ANY(%s)", ids)]
    assert results == [{"n": 20}] * 20
    assert worker.completer is not None and worker.completer.batches <= 4, worker.completer.batches


def test_sync_and_async_queues_share_the_lane_in_claim_order_of_their_groups(tq: TaskQueue) -> None:
    worker = new_worker(inline=True, queues=["cpu", "io"])
    ran: list[tuple[str, int]] = []
    threads: set[str] = set()

    @worker.handler("cpu")
    def cpu(task: Task) -> Any:
        threads.add(threading.current_thread().name)
        ran.append(("cpu", task.id))

    @worker.handler("io")
    async def io(task: Task) -> Any:
        threads.add(threading.current_thread().name)
        await asyncio.sleep(0)
        ran.append(("io", task.id))

    ids = tq.enqueue_many([{"payload": i, "queue": "cpu" if i % 2 else "io", "priority": i % 3} for i in range(120)])
    with running(worker, tq):
        seen = recorded(worker, ids)
    assert {seen[i] for i in ids} == {"done"}
    assert sorted(task_id for _, task_id in ran) == sorted(ids), "a task ran twice or not at all"
    assert threads == {"taskqueue-claimer"}


def test_an_urgent_task_joins_a_running_group(tq: TaskQueue) -> None:
    """A NOTIFY while a group runs: the look after the next coroutine ends claims the urgent task into it.

    The holder waits for the urgent task to have run; were the urgent task left for the next claim,
    after the group, the holder would time out and fail.
    """
    worker = new_worker(inline=True, async_concurrency=10)
    ran: list[int] = []
    events: dict[str, asyncio.Event] = {}

    @worker.handler("default")
    async def handle(task: Task) -> Any:
        ran.append(task.id)
        urgent_ran = events.setdefault("urgent", asyncio.Event())
        if task.payload == "holder":
            await asyncio.wait_for(urgent_ran.wait(), 5.0)
        elif task.payload == "urgent":
            urgent_ran.set()
        elif isinstance(task.payload, int):
            await asyncio.sleep(0.2 * task.payload)  # the group's coroutines end one after another, for 1.6 s
        return None

    warm = tq.enqueue("warm-up")
    with running(worker, tq):
        recorded(worker, [warm])
        _until_an_empty_round(worker)
        group = tq.enqueue_many([{"payload": "holder", "priority": 5}]
                                + [{"payload": k, "priority": 5} for k in range(1, 9)])
        assert wait_for(lambda: len(ran) >= 10), "the group did not start"
        urgent = tq.enqueue("urgent", priority=0)
        seen = recorded(worker, [*group, urgent], states=("done", "scheduled", "failed"))
    assert seen[group[0]] == "done", "the urgent task waited for the group to end"
    assert seen[urgent] == "done"


def test_a_stop_lets_the_group_in_hand_finish_and_claims_no_more(tq: TaskQueue) -> None:
    worker = new_worker(inline=True, async_concurrency=4, grace=30.0)
    began: list[int] = []
    holder: dict[str, asyncio.Event] = {}
    all_began = threading.Event()

    @worker.handler("default")
    async def handle(task: Task) -> Any:
        if task.payload == "warm-up":
            return None
        began.append(task.id)
        event = holder.setdefault("go", asyncio.Event())
        if len(began) == 4:
            all_began.set()
        await asyncio.wait_for(event.wait(), WAIT)

    thread = start_warmed_up(worker, tq)
    try:
        ids = tq.enqueue_many([{"payload": i} for i in range(12)])
        assert all_began.wait(WAIT), "the first group did not start"
        worker.stop()  # graceful: the group in hand may finish
        assert wait_for(lambda: worker.claimer is not None and worker.claimer.stopping)
        loop = worker.async_handlers.loop if worker.async_handlers else None
        assert loop is not None
        loop.call_soon_threadsafe(holder["go"].set)
        thread.join(WAIT)
        assert not thread.is_alive(), "the worker did not stop"
    finally:
        worker.stop(now=True)
    rows = dict(sql(tq.dsn, "SELECT id, state FROM taskqueue.tasks WHERE id = ANY(%s)", ids))
    assert sorted(i for i in ids if rows[i] == "done") == sorted(began)
    assert len(began) == 4
    assert {rows[i] for i in ids if i not in began} == {"queued"}
    attempts = {a for (a,) in sql(tq.dsn, "SELECT attempts FROM taskqueue.tasks WHERE state = 'queued'")}
    assert attempts == {0}, "a claim given back used up an attempt"
    assert worker.async_handlers is not None and worker.async_handlers.loop is not None
    assert worker.async_handlers.loop.is_closed(), "the lane's event loop was left open"


def test_the_grace_period_cancels_a_coroutine_that_outlasts_it(tq: TaskQueue) -> None:
    worker = new_worker(inline=True, grace=0.3)
    cancelled = threading.Event()
    began = threading.Event()

    @worker.handler("default")
    async def handle(task: Task) -> Any:
        began.set()
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            cancelled.set()
            raise

    task_id = tq.enqueue("forever")
    thread = threading.Thread(target=worker.run, args=(tq,), daemon=True)
    worker.signals.init()
    thread.start()
    try:
        assert began.wait(WAIT)
        stopped = time.monotonic()
        worker.stop()
        thread.join(WAIT)
        assert not thread.is_alive(), "the worker did not stop"
        assert time.monotonic() - stopped < WAIT
    finally:
        worker.stop(now=True)
    assert cancelled.is_set()
    assert sql(tq.dsn, "SELECT state, attempts FROM taskqueue.tasks WHERE id = %s", task_id) == [("queued", 0)]


def recording_handlers(
    tq: TaskQueue, tasks: list[Task]
) -> tuple[AsyncHandlers, Capacity, list[int], list[tuple[int, object]]]:
    """AsyncHandlers for claimed ``tasks`` (no loop yet), the ids its handler ran, and each (id, report) delivered."""
    capacity = Capacity(None, len(tasks), on_free=lambda: None, async_concurrency=len(tasks))
    capacity.add_all(tasks, time.monotonic(), ASYNC)
    completer = Completer(tq, capacity, worker="aio-test")
    ran: list[int] = []

    async def handler(t: Task) -> None:
        ran.append(t.id)

    delivered: list[tuple[int, object]] = []

    def deliver(t: Task, report: object) -> None:
        delivered.append((t.id, report))
        capacity.remove(t)

    handlers = AsyncHandlers(Outcomes(capacity, completer, {"default": handler}, worker="aio-test"), deliver=deliver)
    return handlers, capacity, ran, delivered


def test_a_coroutine_cancelled_before_its_first_step_still_ends_its_claim(tq: TaskQueue) -> None:
    """asyncio never enters a task cancelled before it first runs: its claim must end all the same."""
    tq.enqueue("never")
    [task] = tq.claim_many(limit=1, worker="aio-test")
    handlers, capacity, ran, delivered = recording_handlers(tq, [task])
    loop = asyncio.new_event_loop()
    try:
        handlers.attach(loop)
        running_task = handlers.start(task)
        running_task.cancel()  # before the loop ever ran it
        loop.run_until_complete(asyncio.wait([running_task]))
        loop.run_until_complete(asyncio.sleep(0))  # the done callbacks
    finally:
        loop.close()
    assert ran == []
    assert delivered == [(task.id, None)]
    assert capacity.busy() == 0 and handlers.pending() == []


def test_a_claims_tasks_reach_the_loop_in_one_call_and_a_later_cancel_still_follows(tq: TaskQueue) -> None:
    """Submits from the claimer's thread are started by one loop call, in order; a cancel sent after them wins."""
    tq.enqueue_many([{"payload": i} for i in range(3)])
    tasks = tq.claim_many(limit=3, worker="aio-test")
    handlers, capacity, ran, delivered = recording_handlers(tq, tasks)
    loop = asyncio.new_event_loop()
    calls: list[str] = []
    threadsafe = loop.call_soon_threadsafe

    def counted(fn: Any, *args: Any, **kwargs: Any) -> Any:
        calls.append(getattr(fn, "__name__", repr(fn)))
        return threadsafe(fn, *args, **kwargs)

    loop.call_soon_threadsafe = counted  # type: ignore[method-assign,assignment]
    try:
        handlers.attach(loop)
        def send() -> None:  # as the claimer does, from its own thread
            for t in tasks:
                handlers.submit(t)
            handlers.cancel(tasks[1])

        sender = threading.Thread(target=send)
        sender.start()
        sender.join()
        assert calls == ["_start_submitted", "_cancel"]  # one call for the three starts, where there were three
        loop.run_until_complete(asyncio.sleep(0.05))
    finally:
        loop.close()
    assert ran == [tasks[0].id, tasks[2].id]
    assert (tasks[1].id, None) in delivered, "the cancelled task's claim ended with nothing recorded"
    assert sorted(i for i, _ in delivered) == sorted(t.id for t in tasks)
    assert capacity.busy() == 0 and handlers.pending() == []


def test_a_submit_with_no_loop_is_logged_and_the_next_loop_gets_the_next(
    tq: TaskQueue, caplog: pytest.LogCaptureFixture
) -> None:
    """A submit that finds the loop closed says so and leaves nothing pending for a later one."""
    tq.enqueue_many([{"payload": i} for i in range(2)])
    first, second = tq.claim_many(limit=2, worker="aio-test")
    handlers, _capacity, ran, _delivered = recording_handlers(tq, [first, second])
    closed = asyncio.new_event_loop()
    closed.close()
    handlers.attach(closed)
    handlers.submit(first)
    assert "no event loop to run on" in caplog.text
    loop = asyncio.new_event_loop()
    try:
        handlers.attach(loop)
        handlers.submit(second)
        loop.run_until_complete(asyncio.sleep(0.05))
    finally:
        loop.close()
    assert ran == [second.id]


@pytest.mark.slow
def test_two_inline_processes_run_sync_and_async_tasks_exactly_once(tq: TaskQueue, dsn: str, tmp_path: Path) -> None:
    """Through the CLI: both kinds on each process's claimer thread, every task once, both processes at work."""
    ids = tq.enqueue_many([{"payload": {"sleep": 0.001}, "queue": "work" if i % 2 else "awork"} for i in range(400)])
    starts, errors, codes = run_two_inline_processes(tq, dsn, tmp_path, "work,awork", ids)
    count = Counter(e["task_id"] for e in starts)
    assert set(count) == set(ids)
    assert max(count.values()) == 1, "a task ran twice"
    assert {e["thread"] for e in starts} == {"taskqueue-claimer"}, "a handler ran off the claimer's thread"
    assert {e["queue"] for e in starts} == {"work", "awork"}
    assert len({e["pid"] for e in starts}) == 2, f"one process ran everything: {errors}"
    assert codes == [0, 0], errors
