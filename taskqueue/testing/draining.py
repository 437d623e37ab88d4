"""Run the waiting tasks of some queues through a Worker's handlers, in this process, until none is left.

A test enqueues, drains and asserts, with no worker thread and no sleep::

    result = drain(tq, worker)
    assert [t.payload for t in result.completed] == [{"to": "a@example.com"}]

The drain claims one task at a time, in claim order, as the worker named
``worker.name`` (or ``taskqueue.testing.drain``) with the worker's lease and
capacity; runs the queue's handler; and records what came of it by the
worker's own rules (:mod:`taskqueue.worker.outcome`): ``Retry``,
``Permanent``, the error text with its traceback, a result that must be JSON.
Tasks the handlers enqueue are drained too. A retried task comes back when it
is due: at once for ``Retry(0)``; after its backoff only with
``with_scheduled=True``, which also runs delayed tasks now.

The steps are planned once, without I/O (:func:`_plan`); ``drain`` performs
them with a ``TaskQueue`` and ``adrain`` awaits them with an
``AsyncTaskQueue`` and ``async def`` handlers.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Callable, Generator, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol, get_args

from .. import operations as ops
from ..errors import LeaseLost, ValidationError
from ..spec import check_int, check_queues
from ..store.requests import Op
from ..task import Task
from ..worker.outcome import Report, check_result, handler_raised, new_report, no_handler

if TYPE_CHECKING:
    from ..db import Mode
    from ..worker import Worker

DRAIN_WORKER = "taskqueue.testing.drain"
#: Handler runs one drain allows before it concludes the handlers keep feeding themselves.
DEFAULT_LIMIT = 1000

Outcome = Literal["completed", "retried", "failed", "cancelled", "lost"]
_OUTCOMES: dict[str, Outcome] = {
    "done": "completed",
    "queued": "retried",
    "scheduled": "retried",
    "failed": "failed",
    "cancelled": "cancelled",
}


class DrainLimitExceeded(AssertionError):
    """The drain ran ``limit`` handlers and work was still waiting: a handler that re-enqueues for ever?"""


@dataclass(frozen=True, slots=True)
class DrainRun:
    """One handler run: the task as its outcome left it, and what the handler gave or raised."""

    task: Task
    outcome: Outcome  # "lost": the claim was gone when the outcome was written (the handler finished it?)
    result: Any
    error: str | None
    duration: float


@dataclass
class DrainResult:
    """What a drain did: every run in the order the tasks were claimed, and the tasks by outcome.

    ``completed``: done (``task.result`` holds what the handler returned).
    ``retried``: failed with attempts left, queued or scheduled again (``task.error`` says why).
    ``failed``: failed for good (out of attempts, ``Permanent``, no handler, a result that is not JSON).
    ``cancelled``: cancelled while it ran. ``lost``: the claim was gone when the outcome was written.
    """

    runs: list[DrainRun] = field(default_factory=list)
    completed: list[Task] = field(default_factory=list)
    retried: list[Task] = field(default_factory=list)
    failed: list[Task] = field(default_factory=list)
    cancelled: list[Task] = field(default_factory=list)
    lost: list[Task] = field(default_factory=list)

    def add(self, run: DrainRun) -> None:
        self.runs.append(run)
        getattr(self, run.outcome).append(run.task)

    def counts(self) -> dict[str, int]:
        """Runs by outcome, every outcome included."""
        return {outcome: len(getattr(self, outcome)) for outcome in get_args(Outcome)}

    def __len__(self) -> int:
        return len(self.runs)

    def __str__(self) -> str:
        counts = ", ".join(f"{n} {outcome}" for outcome, n in self.counts().items() if n)
        lines = [f"drained {len(self.runs)} run(s)" + (f": {counts}" if counts else "")]
        for run in self.runs:
            detail = "" if run.error is None else f": {run.error.splitlines()[0]}"
            lines.append(f"  task {run.task.id} (queue {run.task.queue!r}, attempt {run.task.attempts}) "
                         f"{run.outcome}{detail}")
        return "\n".join(lines)


@dataclass(frozen=True, slots=True)
class _Query:
    """Run an operation on the queue."""

    op: Op[Any]
    mode: Mode = "transaction"


@dataclass(frozen=True, slots=True)
class _Call:
    """Run the handler on the report's task and record what it returned or raised in the report."""

    handler: Callable[[Task], Any]
    report: Report


class _Queue(Protocol):
    """What a drain needs of a queue: ``TaskQueue`` and ``AsyncTaskQueue`` both have it."""

    channel: str

    def _run(self, op: Op[Any], connection: Any = None, *, mode: Mode = "transaction") -> Any: ...


def _queues(worker: Worker, queues: Iterable[str] | None) -> list[str]:
    if queues is None:
        queues = worker.queues if worker.queues is not None else sorted(worker.handlers)
        if not queues:
            raise ValidationError("queues", "the worker has no handler: give queues, or register handlers first")
    checked = check_queues(queues)
    assert checked is not None  # check_queues refuses an empty list
    return checked


def _record(report: Report, channel: str) -> Op[bool]:
    """Write the outcome as the worker's completer does; False when the claim was no longer current."""
    try:
        if report.error is None:
            yield from ops.complete(report.task, report.result, channel=channel)
        else:
            yield from ops.fail(report.task, report.error, retry=report.retry, retry_in=report.retry_in,
                                channel=channel)
    except LeaseLost:
        return False
    return True


def _plan(
    worker: Worker, queues: Iterable[str] | None, *, with_scheduled: bool, limit: int, channel: str
) -> Generator[_Query | _Call, Any, DrainResult]:
    """The drain's steps: claim, call, record, until a claim finds nothing."""
    names = _queues(worker, queues)
    limit = check_int(limit, "limit", minimum=1, maximum=10_000_000)
    name = worker.name or DRAIN_WORKER
    result = DrainResult()
    while True:
        if with_scheduled:
            yield _Query(ops.make_scheduled_due(names))
        claim = ops.claim_one(worker.capacity, names, name, worker.lease, "min")
        task: Task | None = yield _Query(claim, "autocommit")
        if task is None:
            return result
        if len(result.runs) >= limit:
            yield _Query(ops.release(task, "released by a drain over its limit", channel=channel))
            raise DrainLimitExceeded(f"drain stopped after {limit} handler runs with work still waiting "
                                     f"(task {task.id}, queue {task.queue!r}); give a higher limit, or "
                                     f"look for a handler that keeps enqueueing\n{result}")
        report = new_report(task, name)
        handler = worker.handlers.get(task.queue)
        started = time.monotonic()
        if handler is None:
            no_handler(report, name)
        else:
            yield _Call(handler, report)
        report.duration = time.monotonic() - started
        check_result(report)
        current = yield _Query(_record(report, channel))
        outcome = _OUTCOMES.get(task.state, "lost") if current else "lost"
        error = None if report.error is None else str(task.error or report.error)
        result.add(DrainRun(task, outcome, report.result if report.error is None else None, error,
                               report.duration))


class _LoopRunning(Exception):
    """An ``async def`` handler met a sync drain inside a running event loop: the test must await adrain."""


#: Not a handler's failure: the test run's own interruptions, and a drain used the wrong way.
_PASS_THROUGH: tuple[type[BaseException], ...] = (KeyboardInterrupt, asyncio.CancelledError, _LoopRunning)


def _call(step: _Call) -> None:
    report = step.report
    try:
        value = step.handler(report.task)
        if inspect.isawaitable(value):
            value = _await_here(value, report.task)
        report.result = value
    except _PASS_THROUGH:
        raise
    except BaseException as exc:  # as in the worker: a handler's SystemExit is its task's failure
        handler_raised(report, exc)


def _await_here(awaitable: Any, task: Task) -> Any:
    """An ``async def`` handler in a sync drain: run on an event loop of its own, unless one is running."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(_awaited(awaitable))
    if inspect.iscoroutine(awaitable):
        awaitable.close()
    raise _LoopRunning(task.queue)


async def _awaited(awaitable: Any) -> Any:
    return await awaitable


async def _acall(step: _Call) -> None:
    report = step.report
    try:
        value = step.handler(report.task)
        report.result = (await value) if inspect.isawaitable(value) else value
    except _PASS_THROUGH:
        raise
    except BaseException as exc:
        handler_raised(report, exc)


def _send(plan: Generator[_Query | _Call, Any, DrainResult], answer: Any) -> _Query | _Call | DrainResult:
    """The plan's next step, or its result once it is done."""
    try:
        return plan.send(answer)
    except StopIteration as stop:
        return stop.value  # type: ignore[no-any-return]


def _perform(queue: _Queue, step: _Query | _Call) -> Any:
    if isinstance(step, _Call):
        try:
            _call(step)
        except _LoopRunning:
            queue._run(ops.release(step.report.task, "released by a drain", channel=queue.channel))
            raise TypeError(f"the handler of queue {step.report.task.queue!r} is async and an event loop "
                            "is running: use `await adrain(...)` in an async test") from None
        return None
    answer = queue._run(step.op, mode=step.mode)
    if inspect.isawaitable(answer):
        if inspect.iscoroutine(answer):
            answer.close()
        raise TypeError("drain() got an async queue: use `await adrain(...)`")
    return answer


async def _aperform(queue: _Queue, step: _Query | _Call) -> Any:
    if isinstance(step, _Call):
        await _acall(step)
        return None
    answer = queue._run(step.op, mode=step.mode)
    return (await answer) if inspect.isawaitable(answer) else answer  # a TaskQueue answers at once


def drain(
    tq: Any,
    worker: Worker,
    queues: Iterable[str] | None = None,
    *,
    with_scheduled: bool = False,
    limit: int = DEFAULT_LIMIT,
) -> DrainResult:
    """Run the waiting tasks of ``queues`` (default: the worker's) through ``worker``'s handlers until none is left.

    ``tq`` is a ``TaskQueue``. ``with_scheduled``: delayed and backed-off tasks
    run now too. Raises ``DrainLimitExceeded`` after ``limit`` runs with work
    still waiting.
    """
    queue: _Queue = tq
    plan = _plan(worker, queues, with_scheduled=with_scheduled, limit=limit, channel=queue.channel)
    step = _send(plan, None)
    while not isinstance(step, DrainResult):
        step = _send(plan, _perform(queue, step))
    return step


async def adrain(
    tq: Any,
    worker: Worker,
    queues: Iterable[str] | None = None,
    *,
    with_scheduled: bool = False,
    limit: int = DEFAULT_LIMIT,
) -> DrainResult:
    """``drain`` in an async test: ``async def`` handlers are awaited, plain ones called.

    ``tq`` is an ``AsyncTaskQueue`` (or a ``TaskQueue``, whose calls then block the loop briefly).
    """
    queue: _Queue = tq
    plan = _plan(worker, queues, with_scheduled=with_scheduled, limit=limit, channel=queue.channel)
    step = _send(plan, None)
    while not isinstance(step, DrainResult):
        step = _send(plan, await _aperform(queue, step))
    return step
