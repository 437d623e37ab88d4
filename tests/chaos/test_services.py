"""A worker service whose thread raises: restarted with backoff, or the worker ends loudly; never half-alive.

Faults are injected by wrapping one method of a live service; progress is
read from the services' test signals, not from sleeps.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from taskqueue import ServiceFailed, TaskQueue, Worker
from taskqueue.worker import supervisor as supervisor_mod

WAIT = 10.0


class Boom(RuntimeError):
    """The injected fault."""


def new_worker(queue: str) -> Worker:
    w = Worker(queues=[queue], lease=0.6, poll_interval=30.0, grace=1.0, maintenance=False)
    w.handler(queue)(lambda task: {"ok": task.id})
    return w


def crash(times: int, real: Callable[..., Any]) -> Callable[..., Any]:
    """``real``, except that its first ``times`` calls raise Boom."""
    left = [times]

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if left[0] > 0:
            left[0] -= 1
            raise Boom("injected")
        return real(*args, **kwargs)

    return wrapper


def crash_heartbeat(worker: Worker, times: int) -> None:
    """Make the first ``times`` beats of the worker's heartbeat raise."""

    def hook(w: Worker) -> None:
        assert w.heartbeat is not None
        w.heartbeat.beat = crash(times, w.heartbeat.beat)  # type: ignore[method-assign]

    worker.on_services.append(hook)


class Run(threading.Thread):
    def __init__(self, worker: Worker, tq: TaskQueue) -> None:
        super().__init__(daemon=True, name="test-worker")
        self.worker, self.tq = worker, tq
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            self.worker.run(self.tq)
        except BaseException as exc:
            self.error = exc


@pytest.fixture
def fast_restarts(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setattr(supervisor_mod, "BACKOFF_MIN", 0.01)
    yield


def test_a_crashed_heartbeat_is_restarted_and_keeps_the_lease(tq: TaskQueue, fast_restarts: None) -> None:
    w = new_worker("hb")
    release = threading.Event()
    w.handlers["hb"] = lambda task: release.wait(WAIT) and {"ok": True}
    w.signals.init()
    crash_heartbeat(w, 1)
    task_id = tq.enqueue({}, queue="hb")
    run = Run(w, tq)
    run.start()
    try:
        name, error = w.signals.crashed.wait(WAIT)
        assert name == "heartbeat" and isinstance(error, Boom)
        assert w.signals.restarted.wait(WAIT) == "heartbeat"
        # Beats after the restart: the lease (0.6 s) outlives several of them.
        for _ in range(4):
            assert w.signals.beaten.wait(WAIT) == 0
    finally:
        release.set()
        w.stop()
        run.join(WAIT)
    assert not run.is_alive() and run.error is None
    got = tq.get(task_id)
    assert got is not None and got.state == "done" and got.attempts == 1


def test_a_service_that_keeps_crashing_ends_the_worker_with_one_error(
    tq: TaskQueue, fast_restarts: None, caplog: pytest.LogCaptureFixture
) -> None:
    w = new_worker("dies")
    hold = threading.Event()
    w.handlers["dies"] = lambda task: hold.wait(WAIT)
    crash_heartbeat(w, 1000)
    task_id = tq.enqueue({}, queue="dies")
    run = Run(w, tq)
    with caplog.at_level(logging.ERROR, logger="taskqueue.worker"):
        run.start()
        run.join(WAIT * 3)
    hold.set()
    assert not run.is_alive(), "the worker hung instead of giving up"
    assert isinstance(run.error, ServiceFailed) and run.error.service == "heartbeat"
    giving_up = [r for r in caplog.records if "giving up" in r.getMessage()]
    assert len(giving_up) == 1
    # Its running task was given back, not left to its lease.
    got = tq.get(task_id)
    assert got is not None and got.state == "queued" and got.attempts == 0


def test_the_listener_survives_an_error_that_is_not_from_the_driver(tq: TaskQueue) -> None:
    w = new_worker("listen")
    w.signals.init()

    def hook(worker: Worker) -> None:
        assert worker.listener is not None
        worker.listener.wake = crash(1, worker.listener.wake)  # type: ignore[method-assign]

    w.on_services.append(hook)
    run = Run(w, tq)
    run.start()
    try:
        assert w.signals.listening.wait(WAIT) == 1
        assert w.signals.listening.wait(WAIT) == 2  # the first wake-up raised; it reconnected
        listener = w.listener
        assert listener is not None and listener.alive and listener.error is None
        task_id = tq.enqueue({}, queue="listen")
        assert w.signals.recorded.wait(WAIT) == {task_id: "done"}
    finally:
        w.stop()
        run.join(WAIT)
    assert not run.is_alive() and run.error is None
