"""What a handler's run comes to: the worker's rules, shared with ``taskqueue.testing.drain``.

One place says what an exception means (``Retry``: again after its delay;
``Permanent``: failed now; anything else: its text and traceback, retried
while attempts remain), what a queue without a handler means, and that a
result must be JSON. The executor applies them on its threads, the test
drain in-process; neither writes them again.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from typing import Any

from ..errors import Permanent, Retry, ValidationError
from ..spec import encode_json
from ..task import Task
from .tracebacks import error_text, summary

# The executor's logger: operators filter on it, and a drain's log reads like a worker's.
log = logging.getLogger("taskqueue.worker.executor")


@dataclass(slots=True)
class Report:
    """What a handler's run came to. ``error`` None means complete with ``result``."""

    task: Task
    result: Any = None
    error: str | BaseException | None = None
    retry: bool = True
    retry_in: float | None = None
    label: str | None = None  # outcome name for the log when it is not just the new state
    duration: float = 0.0
    fields: dict[str, Any] = field(default_factory=dict)


def new_report(task: Task, worker: str) -> Report:
    fields = {"task_id": task.id, "queue": task.queue, "worker": worker, "attempt": task.attempts}
    return Report(task, fields=fields)


def no_handler(report: Report, worker: str) -> None:
    """A task of a queue without a handler fails for good: no attempt would find one."""
    report.error = f"no handler for queue {report.task.queue!r} on worker {worker}"
    report.retry, report.label = False, "no_handler"


def handler_raised(report: Report, exc: BaseException) -> None:
    """Record what the handler's exception asks for: Retry, Permanent, a cancellation on request, or an error."""
    task = report.task
    if isinstance(exc, Retry):
        report.error, report.retry_in = exc.reason, exc.in_
    elif isinstance(exc, Permanent):
        report.error, report.retry = f"Permanent: {exc}", False
    elif isinstance(exc, asyncio.CancelledError) and task.cancel_requested:
        report.error, report.retry = "cancelled on request", False
    else:  # a handler's SystemExit must not end the worker either
        # The traceback is logged here, once, and stored with the task (see tracebacks.py).
        log.warning("task %s (queue %s) raised %s", task.id, task.queue, summary(exc), exc_info=exc,
                    extra={**report.fields, "outcome": "raised"})
        report.error = error_text(exc)


def check_result(report: Report) -> None:
    """A result that is not JSON fails the task for good: running it again would return the same."""
    if report.error is not None:
        return
    try:
        encode_json(report.result, "result")
    except ValidationError as exc:
        report.error = f"handler returned a value that is not JSON ({type(report.result).__name__}): {exc}"
        report.result, report.retry, report.label = None, False, "bad_result"
