"""Plans: each public queue method written once, run by the sync ``TaskQueue`` and the ``AsyncTaskQueue``.

A store operation (:mod:`taskqueue.store.requests`) is one transaction's
worth of statements. A *plan* is one public method: a generator that yields
steps (run this operation on a connection held this way; pause) and gets
each step's result back, or its error thrown in. It keeps the counters,
catches what it must and returns the method's result. It does no I/O itself,
so :func:`blocking` binds it to a front-end that performs steps with the
sync runner and :func:`awaiting` to one that awaits the async runner:
statements, validation, result mapping and every rule around them exist once
(:mod:`taskqueue.api`), and ``TaskQueue.claim`` and ``AsyncTaskQueue.claim``
share their signature and docstring, which ``functools.wraps`` carries over.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Awaitable, Callable, Generator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Concatenate, ParamSpec, Protocol, TypeAlias, TypeVar

from .store.requests import Op

if TYPE_CHECKING:
    from .counters import Counters
    from .db import Mode

T = TypeVar("T")
P = ParamSpec("P")


@dataclass(frozen=True, slots=True)
class Run:
    """Run a store operation; ``connection`` is the caller's (or None for one of ours), held as ``mode`` says."""

    op: Op[Any]
    connection: Any = None
    mode: Mode = "transaction"


@dataclass(frozen=True, slots=True)
class Pause:
    """Wait before the next step (``time.sleep`` or ``asyncio.sleep``, as the front-end runs)."""

    seconds: float


Step = Run | Pause

#: A public method's body: yields steps, receives their results, returns ``T``.
Plan: TypeAlias = Generator[Step, Any, T]


class QueueHandle(Protocol):
    """What a plan may read of the front-end running it."""

    schema: str
    channel: str
    counters: Counters


class Performer(QueueHandle, Protocol):
    def _perform(self, plan: Plan[Any]) -> Any: ...


def _as_method(method: Any, plan: Callable[..., Any]) -> None:
    """Show the method as its callers see it: ``self`` first, the plan's result as the return."""
    signature = inspect.signature(plan)
    params = list(signature.parameters.values())
    returns = signature.return_annotation
    if isinstance(returns, str) and returns.startswith("Plan[") and returns.endswith("]"):
        returns = returns[len("Plan[") : -1]
    receiver = params[0].replace(name="self", annotation=inspect.Parameter.empty)
    method.__signature__ = signature.replace(parameters=[receiver, *params[1:]], return_annotation=returns)


def blocking(plan: Callable[Concatenate[QueueHandle, P], Plan[T]]) -> Callable[Concatenate[Performer, P], T]:
    """The sync method of a plan: each step performed before the next, on the calling thread."""

    @functools.wraps(plan)
    def method(self: Performer, /, *args: P.args, **kwargs: P.kwargs) -> T:
        result: T = self._perform(plan(self, *args, **kwargs))
        return result

    _as_method(method, plan)
    return method


def awaiting(
    plan: Callable[Concatenate[QueueHandle, P], Plan[T]],
) -> Callable[Concatenate[Performer, P], Awaitable[T]]:
    """The coroutine method of a plan: the same steps, awaited on the running event loop."""

    @functools.wraps(plan)
    async def method(self: Performer, /, *args: P.args, **kwargs: P.kwargs) -> T:
        result: T = await self._perform(plan(self, *args, **kwargs))
        return result

    _as_method(method, plan)
    return method


def first_step(plan: Plan[T]) -> tuple[Step | None, T | None]:
    """Start a plan: its first step, or (None, result) when it needs no database at all."""
    try:
        return next(plan), None
    except StopIteration as stop:
        return None, stop.value


def advance(plan: Plan[T], result: Any = None, error: BaseException | None = None) -> tuple[Step | None, T | None]:
    """Give a plan its step's result (or throw the step's error in): its next step, or (None, its result)."""
    try:
        return (plan.throw(error) if error is not None else plan.send(result)), None
    except StopIteration as stop:
        return None, stop.value


def retrying(
    make: Callable[[], Run],
    *,
    retryable: Callable[[BaseException], bool],
    attempts: int,
    delay: Callable[[int], float],
) -> Plan[Any]:
    """Run a fresh step of ``make()`` again, after ``delay(attempt)``, while its error is ``retryable``."""
    for attempt in range(1, attempts + 1):
        try:
            return (yield make())
        except Exception as exc:
            if attempt == attempts or not retryable(exc):
                raise
        yield Pause(delay(attempt))
    raise AssertionError("unreachable")  # pragma: no cover
