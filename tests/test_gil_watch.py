"""The warning that sync handlers hold the GIL, so that a worker's handler threads only take turns at it.

Unit cases feed the watch CPU times and say when it warns (once per run, when
the handlers took most of a busy process's CPU, with enough threads and
tasks, and no more than about one core). Worker cases run
real handlers: CPU-bound ones on 8 threads get the warning, sleeping ones and
the inline lane do not.
"""

from __future__ import annotations

import logging
import time
from typing import Any

import pytest

from taskqueue import Task, TaskQueue, Worker
from taskqueue.worker import gil
from taskqueue.worker.gil import GilWatch
from tests.test_worker import new_worker, recorded, running


class Clock:
    """A process CPU clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _window(watch: GilWatch, clock: Clock, tasks: int, cpu_each: float, ran: float, start: float) -> None:
    """One 1 s window: ``tasks`` handlers of ``cpu_each`` s each, while the process ran ``ran`` s of CPU."""
    for i in range(1, tasks + 1):
        if i == tasks:
            clock.now += ran
        watch.ran(cpu_each, start + i / tasks)


def _warnings(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if "hold the GIL" in r.getMessage()]


@pytest.mark.parametrize(
    ("cpu_each", "ran", "why"),
    [
        (0.0097, 1.0, "0.97 of a core, all of it the handlers'"),
        (0.0060, 0.65, "a loaded host left the process 0.65 of a core, and the handlers took 92% of it"),
    ],
)
def test_handlers_that_take_most_of_a_busy_process_warn_once(
    cpu_each: float, ran: float, why: str, caplog: pytest.LogCaptureFixture
) -> None:
    clock = Clock()
    watch = GilWatch(32, worker="w", window=1.0, process_clock=clock, every=1)
    start = time.monotonic()
    with caplog.at_level(logging.WARNING, logger="taskqueue.worker"):
        _window(watch, clock, 100, cpu_each, ran, start)
        _window(watch, clock, 100, cpu_each, ran, start + 1.0)
    assert watch.share == pytest.approx(cpu_each * 100, rel=0.05), why
    assert watch.of_process == pytest.approx(cpu_each * 100 / ran, rel=0.05), why
    [warning] = _warnings(caplog)
    assert warning.levelno == logging.WARNING
    assert "32 handler threads" in warning.getMessage() and "--inline" in warning.getMessage()
    assert warning.handler_share_of_process == pytest.approx(cpu_each * 100 / ran, rel=0.05)


@pytest.mark.parametrize(
    ("threads", "tasks", "cpu_each", "ran", "why"),
    [
        (32, 100, 0.003, 0.35, "the process ran a third of the time: the threads mostly wait on I/O"),
        (32, 100, 0.003, 0.9, "a busy process, but the handlers took a third of it"),
        (32, 100, 0.019, 1.95, "1.9 cores: the handlers compute outside the GIL, where threads help"),
        (2, 100, 0.0097, 1.0, "two threads hardly wait for each other"),
        (32, 7, 0.097, 1.0, "too few timed handlers to judge yet"),
    ],
)
def test_no_warning_where_threads_are_not_taking_turns(
    threads: int, tasks: int, cpu_each: float, ran: float, why: str, caplog: pytest.LogCaptureFixture
) -> None:
    clock = Clock()
    watch = GilWatch(threads, worker="w", window=1.0, process_clock=clock, every=1)
    start = time.monotonic()
    with caplog.at_level(logging.WARNING, logger="taskqueue.worker"):
        _window(watch, clock, tasks, cpu_each, ran, start)
        _window(watch, clock, tasks, cpu_each, ran, start + 1.0)
    assert _warnings(caplog) == [], why
    assert not watch.warned


def test_long_handlers_are_judged_once_enough_of_them_returned(caplog: pytest.LogCaptureFixture) -> None:
    """10 tasks a second: the window widens until 16 timed ones have returned, then judges them together."""
    clock = Clock()
    watch = GilWatch(32, worker="w", window=1.0, process_clock=clock, every=1)
    start = time.monotonic()
    with caplog.at_level(logging.WARNING, logger="taskqueue.worker"):
        _window(watch, clock, 10, 0.097, 1.0, start)
        assert watch.share is None, "judged on fewer than 16 timed handlers"
        _window(watch, clock, 10, 0.097, 1.0, start + 1)
    assert watch.share == pytest.approx(0.97, rel=0.05)
    assert len(_warnings(caplog)) == 1


def _drain(worker: Worker, tq: TaskQueue, tasks: int, caplog: pytest.LogCaptureFixture) -> GilWatch | None:
    """Run ``worker`` until ``tasks`` new tasks are recorded, warnings captured; its GIL watch (None: inline)."""
    ids = tq.enqueue_many([{"payload": i} for i in range(tasks)])
    with caplog.at_level(logging.WARNING, logger="taskqueue.worker"), running(worker, tq):
        recorded(worker, ids)
    assert worker.executor is not None
    return worker.executor.outcomes.watch


def _spin(seconds: float) -> None:
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        pass


def test_a_worker_of_cpu_bound_handlers_on_eight_threads_is_told(
    tq: TaskQueue, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(gil, "WINDOW_SECONDS", 0.5)
    worker = new_worker(concurrency=8)

    @worker.handler("default")
    def handle(task: Task) -> Any:
        _spin(0.002)

    watch = _drain(worker, tq, 600, caplog)  # 1.2 s of CPU
    assert watch is not None and watch.of_process is not None
    told = _warnings(caplog)
    assert len(told) == 1
    # The window that told it (the last one, at the drain's tail, can fall below: it measured 0.79 once).
    assert told[0].handler_share_of_process >= 0.8, told[0].handler_share_of_process


def test_sleeping_handlers_and_the_inline_lane_are_not_told(
    tq: TaskQueue, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(gil, "WINDOW_SECONDS", 0.25)
    sleeper = new_worker(concurrency=8)

    @sleeper.handler("default")
    def nap(task: Task) -> Any:
        time.sleep(0.004)

    watch = _drain(sleeper, tq, 1000, caplog)  # about 0.5 s on 8 threads
    assert watch is not None and watch.share is not None and watch.share < 0.5, watch.share

    inline = new_worker(inline=True)

    @inline.handler("default")
    def compute(task: Task) -> Any:
        _spin(0.002)

    assert _drain(inline, tq, 300, caplog) is None
    assert _warnings(caplog) == []
