"""A task's claim and its end: claim, heartbeat, complete, fail, requeue, rescue; reads by id.

Statements: ``tasks.sql`` (claim_tasks, heartbeat_task[s], complete_task[s],
fail_task, requeue_task, rescue_expired_tasks, cancel_task) and ``admin.sql``
(get_task, list_tasks). Rows become :class:`~taskqueue.task.Task` here and
nowhere else.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..task import Task, TaskState
from .pools import release_pools
from .requests import Op, Row, first, rowcount, rows, tuples

_UUID_LIST = re.compile(r"[0-9a-fA-F-]+(,[0-9a-fA-F-]+)*")


def int_array(values: Sequence[int]) -> str:
    """A bigint[] literal: psycopg's list dumper costs about 3 µs an element, a join a tenth of that."""
    for v in values:
        if type(v) is not int:
            raise TypeError(f"not an id: {v!r}")
    return "{" + ",".join(map(str, values)) + "}"


def uuid_array(values: Sequence[str]) -> str:
    """A uuid[] literal of lease tokens (hex digits and dashes only, so nothing needs quoting)."""
    text = ",".join(values)
    if values and not _UUID_LIST.fullmatch(text):
        raise TypeError("lease tokens must be UUIDs")
    return "{" + text + "}"


def tasks_of(found: Sequence[tuple[Any, ...]]) -> list[Task]:
    """Rows of claim_tasks or _task_rows, whose columns are Task's fields in their order."""
    return [Task(*r) for r in found]


@dataclass(frozen=True, slots=True)
class Outcome:
    """What a complete/fail/requeue did: the new state and run_at (the statement sent its own wake-up)."""

    state: TaskState
    run_at: dt.datetime | None = None


@dataclass(frozen=True, slots=True)
class Beat:
    id: int
    lease_expires_at: dt.datetime
    cancel_requested: bool


def _outcome(row: Row | None) -> Outcome | None:
    return None if row is None else Outcome(row["state"], row["run_at"])


def _pool_counts(found: Sequence[Row]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for r in found:
        if r["pool"] is not None:
            counts[r["pool"]] = counts.get(r["pool"], 0) + 1
    return counts


def claim(
    *,
    available: int | None,
    limit: int,
    queues: list[str] | None,
    worker: str,
    lease: float,
    descending: bool,
    peek: bool = False,
) -> Op[list[Task]]:
    """The claim function; with ``peek`` it only answers what it would claim (read-only, no locks)."""
    params = {"available": available, "limit": limit, "queues": queues, "worker": worker, "lease": lease}
    found = yield from tuples("claim_tasks", descending=descending, peek=peek, **params)
    return tasks_of(found)


def heartbeat(task_id: int, token: str, lease: float | None) -> Op[Beat | None]:
    row = yield from first("heartbeat_task", id=task_id, token=token, lease=lease)
    return None if row is None else Beat(task_id, row["lease_expires_at"], row["cancel_requested"])


def heartbeat_many(claims: Sequence[tuple[int, str]], lease: float | None) -> Op[dict[int, Beat]]:
    if not claims:
        return {}
    found = yield from rows(
        "heartbeat_tasks", ids=[c[0] for c in claims], tokens=[c[1] for c in claims], lease=lease
    )
    return {r["id"]: Beat(r["id"], r["lease_expires_at"], r["cancel_requested"]) for r in found}


#: A single completion adds one task in this many (by id) to its queue's
#: learnt estimate; complete_task is given it, and the rest end with
#: complete_task_alone when they have no pool, complete_task_pooled when they do.
ESTIMATE_SAMPLE = 8


def complete(task_id: int, token: str, result_json: str | None, channel: str, *, pooled: bool) -> Op[Outcome | None]:
    """Complete one claim; the statement wakes the workers itself when it frees a full pool.

    A task with no pool and outside the estimate's sample ends with one
    plain UPDATE (complete_task_alone); if that matches nothing, complete_task
    decides, so a lost lease or an unknown pool is handled as before. A pooled
    one outside the sample ends with complete_task_pooled, which releases its
    slot as complete_task does, without the estimate's upsert.
    """
    if task_id % ESTIMATE_SAMPLE != 0:
        if pooled:
            row = yield from first("complete_task_pooled", id=task_id, token=token, result=result_json,
                                   channel=channel)
            return _outcome(row)
        row = yield from first("complete_task_alone", id=task_id, token=token, result=result_json)
        if row is not None:
            return _outcome(row)
    row = yield from first("complete_task", id=task_id, token=token, result=result_json, channel=channel,
                           sample=ESTIMATE_SAMPLE)
    return _outcome(row)


def complete_many(claims: Sequence[tuple[int, str, str | None]]) -> Op[tuple[dict[int, TaskState], bool]]:
    """Complete (id, token, result_json) claims in one statement; return ({id: state}, freed a full pool).

    Pools are released afterwards in name order, one update per pool.
    """
    if not claims:
        return {}, False
    results = [c[2] for c in claims]
    found = yield from rows(
        "complete_tasks",
        ids=int_array([c[0] for c in claims]),
        tokens=uuid_array([c[1] for c in claims]),
        results=results if any(r is not None for r in results) else [],  # unnest pads it with NULLs
    )
    freed = yield from release_pools(_pool_counts(found))
    return {r["id"]: r["state"] for r in found}, freed


def fail(task_id: int, token: str, error: str, *, retry: bool, retry_in: float, channel: str) -> Op[Outcome | None]:
    """Fail one claim; the statement wakes the workers when the task is queued again or a full pool freed."""
    row = yield from first("fail_task", id=task_id, token=token, error=error, retry=retry, retry_in=retry_in,
                           channel=channel)
    return _outcome(row)


def requeue(task_id: int, token: str, reason: str, channel: str) -> Op[Outcome | None]:
    row = yield from first("requeue_task", id=task_id, token=token, error=reason, channel=channel)
    return _outcome(row)


def rescue_expired() -> Op[list[tuple[int, str | None, str]]]:
    """Requeue or fail every expired lease and release its pool slot; return (id, pool, state)."""
    found = yield from rows("rescue_expired_tasks")
    yield from release_pools(_pool_counts(found))
    return [(r["id"], r["pool"], r["state"]) for r in found]


def cancel(task_id: int) -> Op[TaskState | None]:
    row = yield from first("cancel_task", id=task_id)
    return None if row is None else row["state"]


def retry(task_id: int) -> Op[str | None]:
    """Re-enqueue a failed task with a fresh attempt budget; its queue, or None if it is not failed."""
    row = yield from first("retry_task", id=task_id)
    return None if row is None else str(row["queue"])


def get(task_id: int) -> Op[Task | None]:
    found = yield from tuples("get_task", id=task_id)
    return tasks_of(found)[0] if found else None


def list_tasks(*, state: TaskState | None, queue: str | None, limit: int) -> Op[list[Task]]:
    found = yield from tuples("list_tasks", state=state, queue=queue, limit=limit)
    return tasks_of(found)


def find(
    *,
    states: list[str] | None,
    queue: str | None,
    payload_json: str | None,
    priority: int | None,
    required: int | None,
    pool: str | None,
    dedupe_key: str | None,
    limit: int,
) -> Op[list[Task]]:
    """Tasks matching every filter given (None: any), oldest first; a payload matches by containment."""
    found = yield from tuples(
        "find_tasks", states=states, queue=queue, payload=payload_json, priority=priority, required=required,
        pool=pool, dedupe_key=dedupe_key, limit=limit,
    )
    return tasks_of(found)


def make_scheduled_due(queues: list[str] | None) -> Op[int]:
    """Scheduled tasks of ``queues`` (None: all) due now; how many."""
    return (yield from rowcount("make_scheduled_due", queues=queues))
