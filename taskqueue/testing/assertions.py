"""Assertions on what a test's queue holds: ``assert_enqueued`` and ``assert_not_enqueued``.

Each filter is optional; a task matches when it matches every filter given.
``payload`` matches by JSON containment (``{"to": "a@b"}`` matches a payload
with that key among others), ``state`` by default is either waiting state
(queued or scheduled). A failure says what was looked for and lists what the
queue does hold in those states, so the test's output shows the difference.

The look-up is one operation (``find_tasks`` in ``taskqueue/sql/testing.sql``)
that a ``TaskQueue`` runs and an ``AsyncTaskQueue`` awaits
(``aassert_enqueued``, ``aassert_not_enqueued``).
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, TypedDict

from .. import operations as ops
from ..store.requests import Op
from ..task import Task, TaskState

if TYPE_CHECKING:
    from typing_extensions import Unpack

#: The states of a task that waits to run: assert_enqueued's default.
WAITING: tuple[TaskState, ...] = ("queued", "scheduled")
#: Tasks a failure message lists at most.
SHOWN = 20
MATCH_LIMIT = 100_000

States = TaskState | Iterable[TaskState] | None
_Found = tuple[list[Task], list[Task]]


def _lookup(filters: dict[str, Any], state: States) -> Op[_Found]:
    """The tasks that match, and (for the message) the first tasks in the same states."""
    matches = yield from ops.find_tasks(states=state, limit=MATCH_LIMIT, **filters)
    present = yield from ops.find_tasks(states=state, limit=SHOWN + 1)
    return matches, present


def _state_words(state: States) -> str:
    if state is None:
        return "in any state"
    names = [state] if isinstance(state, str) else list(state)
    return " or ".join(names)


def _wanted(filters: dict[str, Any], state: States) -> str:
    parts = [f"payload containing {json.dumps(v)}" if k == "payload" else f"{k}={v!r}" for k, v in filters.items()]
    parts.append(_state_words(state) if state is None else f"state {_state_words(state)}")
    return ", ".join(parts)


def describe(task: Task) -> str:
    """One line per task, for failure messages."""
    extras = "".join(
        f" {name}={value!r}" for name, value in (("pool", task.pool), ("dedupe_key", task.dedupe_key)) if value
    )
    return (f"task {task.id}: queue={task.queue!r} state={task.state} priority={task.priority} "
            f"required={task.required}{extras} payload={json.dumps(task.payload)}")


def _listing(title: str, tasks: list[Task], more: bool = False) -> str:
    lines = [f"{title}:"] + [f"  {describe(t)}" for t in tasks[:SHOWN]]
    if more or len(tasks) > SHOWN:
        lines.append("  ...")
    return "\n".join(lines)


def _present(present: list[Task], state: States) -> str:
    words = _state_words(state)
    if not present:
        return f"the queue holds no task {words}" if state is None else f"the queue holds no task that is {words}"
    return _listing(f"the queue holds, {words}", present, more=len(present) > SHOWN)


def _expect_enqueued(found: _Found, filters: dict[str, Any], state: States, count: int | None) -> list[Task]:
    __tracebackhide__ = True  # pytest shows the failure at the test's own line
    matches, present = found
    if count is None and matches:
        return matches
    if count is not None and len(matches) == count:
        return matches
    wanted = _wanted(filters, state)
    if count is None:
        head = f"no task enqueued with {wanted}"
    else:
        head = f"expected {count} task(s) enqueued with {wanted}, found {len(matches)}"
    parts = [head]
    if matches:
        parts.append(_listing("matching", matches))
    parts.append(_present(present, state))
    raise AssertionError("\n".join(parts))


def _expect_not_enqueued(found: _Found, filters: dict[str, Any], state: States) -> None:
    __tracebackhide__ = True  # pytest shows the failure at the test's own line
    matches, _present_tasks = found
    if matches:
        raise AssertionError(
            f"expected no task enqueued with {_wanted(filters, state)}, found {len(matches)}\n"
            + _listing("matching", matches)
        )


class Filters(TypedDict, total=False):
    """What the assertions look for; a task matches when it matches every key given.

    ``payload`` matches by JSON containment; ``state`` is a state, several, or
    None for any, and defaults to queued or scheduled (waiting to run).
    """

    queue: str
    payload: Any
    priority: int
    required: int
    pool: str
    dedupe_key: str
    state: States


def _split(filters: Filters) -> tuple[dict[str, Any], States]:
    unknown = set(filters) - Filters.__optional_keys__
    if unknown:
        raise TypeError(f"unknown filter(s) {', '.join(sorted(unknown))}; "
                        f"known: {', '.join(sorted(Filters.__optional_keys__))}")
    state = filters.get("state", WAITING)
    return {name: value for name, value in filters.items() if name != "state" and value is not None}, state


def _sync(tq: Any, op: Op[_Found], name: str) -> _Found:
    found = tq._run(op)
    if inspect.isawaitable(found):
        if inspect.iscoroutine(found):
            found.close()
        raise TypeError(f"{name}() got an async queue: use `await a{name}(...)`")
    return found  # type: ignore[no-any-return]


async def _async(tq: Any, op: Op[_Found]) -> _Found:
    found = tq._run(op)
    return (await found) if inspect.isawaitable(found) else found  # type: ignore[no-any-return]


def assert_enqueued(tq: Any, *, count: int | None = None, **filters: Unpack[Filters]) -> list[Task]:
    """The tasks matching every filter given, oldest first; AssertionError when there is none.

    ``count``: exactly that many must match. Filters: :class:`Filters`.
    """
    __tracebackhide__ = True
    wanted, state = _split(filters)
    return _expect_enqueued(_sync(tq, _lookup(wanted, state), "assert_enqueued"), wanted, state, count)


def assert_not_enqueued(tq: Any, **filters: Unpack[Filters]) -> None:
    """AssertionError, listing them, when any task matches every filter given."""
    __tracebackhide__ = True
    wanted, state = _split(filters)
    _expect_not_enqueued(_sync(tq, _lookup(wanted, state), "assert_not_enqueued"), wanted, state)


async def aassert_enqueued(tq: Any, *, count: int | None = None, **filters: Unpack[Filters]) -> list[Task]:
    """``assert_enqueued`` for an ``AsyncTaskQueue``."""
    __tracebackhide__ = True
    wanted, state = _split(filters)
    return _expect_enqueued(await _async(tq, _lookup(wanted, state)), wanted, state, count)


async def aassert_not_enqueued(tq: Any, **filters: Unpack[Filters]) -> None:
    """``assert_not_enqueued`` for an ``AsyncTaskQueue``."""
    __tracebackhide__ = True
    wanted, state = _split(filters)
    _expect_not_enqueued(await _async(tq, _lookup(wanted, state)), wanted, state)
