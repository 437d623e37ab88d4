"""Runs handlers on daemon threads and turns what they do into an outcome report.

Threads are daemons on purpose: after the grace period the worker gives the
unfinished claims back and returns, and a stuck handler must not keep the
process alive. (``concurrent.futures`` threads are joined at exit, so they
would.)
"""

from __future__ import annotations

import logging
import queue as queue_mod
import time
from collections.abc import Callable, Mapping
from typing import Any

from ..errors import Permanent, Retry, ValidationError
from ..spec import encode_json
from ..task import Task
from .capacity import Capacity, Hold
from .completer import Completer, Report
from .service import Service, WorkerSignals

log = logging.getLogger("taskqueue.worker.executor")

Handler = Callable[[Task], Any]

_STOP = object()


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
    ) -> None:
        super().__init__("handler", worker=worker, size=threads, signals=signals)
        self.capacity = capacity
        self.completer = completer
        self.handlers = dict(handlers)
        self._inbox: queue_mod.SimpleQueue[Any] = queue_mod.SimpleQueue()

    def submit(self, task: Task) -> None:
        self._inbox.put(task)

    def interrupt(self) -> None:
        for _ in range(self.alive_threads()):
            self._inbox.put(_STOP)

    def run(self) -> None:
        while True:
            item = self._inbox.get()
            if item is _STOP:
                return
            report = None
            try:
                report = self.run_one(item)
            except Exception:  # pragma: no cover - run_one handles its own errors
                log.exception("unexpected error around task %s", item.id)
            finally:
                if report is None:
                    self.capacity.remove(item)
                else:
                    self.completer.submit(report)

    # -- one task -----------------------------------------------------------
    def run_one(self, task: Task) -> Report | None:
        """Run the handler; the outcome to record, or None when it is no longer ours to record."""
        fields = {"task_id": task.id, "queue": task.queue, "worker": self.worker, "attempt": task.attempts}
        handler = self.handlers.get(task.queue)
        started = time.monotonic()
        log.debug("task %s started (queue %s, attempt %s)", task.id, task.queue, task.attempts, extra=fields)
        report = Report(task, fields=fields)
        if handler is None:
            report.error = f"no handler for queue {task.queue!r} on worker {self.worker}"
            report.retry, report.label = False, "no_handler"
        else:
            try:
                report.result = handler(task)
            except Retry as exc:
                report.error, report.retry_in = exc.reason, exc.in_
            except Permanent as exc:
                report.error, report.retry = f"Permanent: {exc}", False
            except BaseException as exc:
                log.debug("task %s raised", task.id, exc_info=True, extra=fields)
                report.error = exc
        report.duration = time.monotonic() - started
        if not self._may_report(task, fields):
            return None
        if report.error is None:
            try:
                encode_json(report.result, "result")
            except ValidationError as exc:
                report.error = f"handler returned a value that is not JSON ({type(report.result).__name__}): {exc}"
                report.result, report.retry, report.label = None, False, "bad_result"
        return report

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
