"""Runs handlers on daemon threads and turns what they do into an outcome report.

:class:`Outcomes` takes a handler's run to its report (the rules themselves,
retry, permanent, raised, not JSON, are :mod:`taskqueue.worker.outcome`'s;
a lease lost meanwhile is this worker's), for the threads here and the
coroutines of :mod:`taskqueue.worker.aio` alike.

Threads are daemons on purpose: after the grace period the worker gives the
unfinished claims back and returns, and a stuck handler must not keep the
process alive. (``concurrent.futures`` threads are joined at exit, so they
would.)
"""

from __future__ import annotations

import itertools
import logging
import time
from collections.abc import Callable, Mapping
from typing import Any

from ..task import Task
from .capacity import SYNC, Capacity, Hold, Kind
from .completer import Completer
from .gil import GilWatch
from .inbox import Inbox
from .outcome import Report, check_result, handler_raised, new_report, no_handler
from .service import Service, WorkerSignals

log = logging.getLogger("taskqueue.worker.executor")

Handler = Callable[[Task], Any]

_STOP = object()


class Outcomes:
    """From a claimed task to the report of its handler's run, whatever runs the handler."""

    def __init__(
        self,
        capacity: Capacity,
        completer: Completer,
        handlers: Mapping[str, Handler],
        *,
        worker: str,
        watch: GilWatch | None = None,
    ) -> None:
        self.capacity = capacity
        self.completer = completer
        self.handlers = dict(handlers)
        self.worker = worker
        self.watch = watch  # handler threads only: the sync handlers' CPU time (gil.py)

    def begin(self, task: Task) -> tuple[Report, Handler | None, float] | None:
        """The report to fill, the handler to call (None: no handler, the report says so) and the start time.

        None when the claim is no longer ours (lost or given back while it waited): nothing to run or record.
        """
        if not self.capacity.begin(task):
            log.warning("task %s (queue %s): its claim was lost before its handler began; not run", task.id,
                        task.queue, extra={"worker": self.worker, "task_id": task.id, "queue": task.queue,
                                           "outcome": "lease_lost"})
            return None
        handler = self.handlers.get(task.queue)
        report = new_report(task, self.worker)
        log.debug("task %s started (queue %s, attempt %s)", task.id, task.queue, task.attempts, extra=report.fields)
        if handler is None:
            no_handler(report, self.worker)
        return report, handler, time.monotonic()

    def raised(self, report: Report, exc: BaseException) -> None:
        """The handler raised ``exc``: Retry, Permanent, a cancellation on request, or an error."""
        handler_raised(report, exc)

    def end(self, report: Report, started: float, kind: Kind = SYNC) -> Report | None:
        """The outcome to record, or None when it is no longer ours to record."""
        task = report.task
        report.duration = time.monotonic() - started
        # A coroutine's own run time says nothing of how many run at once: async paces by the gap alone.
        self.capacity.pace_of(kind).finished(ran=report.duration if kind == SYNC else None)
        if not self._may_report(task, report.fields):
            return None
        check_result(report)
        return report

    def run(self, task: Task) -> Report | None:
        """Run the handler here; the outcome to record, or None when it is no longer ours to record."""
        begun = self.begin(task)
        if begun is None:
            return None
        report, handler, started = begun
        if handler is not None:
            watch = self.watch
            timed = watch is not None and watch.timing()
            cpu = time.thread_time() if timed else 0.0
            try:
                report.result = handler(task)
            except BaseException as exc:
                self.raised(report, exc)
            if timed and watch is not None:
                watch.ran(time.thread_time() - cpu, time.monotonic())
        return self.end(report, started)

    def deliver(self, task: Task, report: Report | None) -> None:
        """Hand the report to the completer, or end the claim here when there is nothing to record."""
        if report is None:
            self.capacity.remove(task)
        else:
            self.completer.submit(report)

    def _may_report(self, task: Task, fields: dict[str, Any]) -> bool:
        hold = self.capacity.start_finishing(task)
        if hold is Hold.FINISHING:
            return True
        reason = "its lease was lost" if hold is Hold.LOST else "it was given back at shutdown"
        log.warning(
            "task %s: handler returned after %s; outcome discarded",
            task.id,
            reason,
            extra={**fields, "outcome": "discarded"},
        )
        return False


class Executor(Service):
    """A fixed set of daemon threads, one per unit of concurrency.

    Stopping does not wait: idle threads exit, busy ones after their handler
    (or with the process).
    """

    join_timeout = 0.0

    def __init__(
        self,
        capacity: Capacity,
        completer: Completer,
        handlers: Mapping[str, Handler],
        *,
        worker: str,
        threads: int,
        signals: WorkerSignals | None = None,
        watch: GilWatch | None = None,
    ) -> None:
        super().__init__("handler", worker=worker, size=threads, signals=signals)
        self.outcomes = Outcomes(capacity, completer, handlers, worker=worker, watch=watch)
        # In claim order, not arrival order: a task claimed ahead of the threads
        # (see pace.py) must not hold back a more urgent one claimed after it.
        self._inbox = Inbox()
        self._seq = itertools.count()

    def submit(self, task: Task) -> None:
        self._inbox.put((0, task.priority, task.id, next(self._seq), task))

    def interrupt(self) -> None:
        for _ in range(self.alive_threads()):
            self._inbox.put((1, 0, 0, next(self._seq), _STOP))  # after every task already submitted

    def run(self) -> None:
        while True:
            item = self._inbox.get()[-1]
            if item is _STOP:
                return
            report = None
            try:
                report = self.outcomes.run(item)
            except Exception:  # pragma: no cover - Outcomes.run handles its own errors
                log.exception("unexpected error around task %s", item.id)
            finally:
                self.outcomes.deliver(item, report)
