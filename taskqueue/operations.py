"""What each ``TaskQueue`` method does, without I/O: validate, run store operations, settle the result.

Every function is an operation (see :mod:`taskqueue.store.requests`): its
validation runs before the first request, so bad input is refused before a
connection is taken or anything is written. ``TaskQueue`` runs these with its
sync runner; an asyncio twin runs the very same functions with its own.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Iterable, Mapping
from typing import Any

from .batch import build_batch
from .errors import LeaseLost, ValidationError
from .retry import backoff_seconds
from .spec import (
    TaskSpec,
    build_spec,
    check_available,
    check_error_text,
    check_int,
    check_lease,
    check_name,
    check_number,
    check_optional_name,
    check_order,
    check_pool_limit,
    check_queues,
    check_state,
    check_task_id,
    encode_json,
)
from .stats import Stats
from .store import admin
from .store import enqueue as enqueue_ops
from .store import pools as pool_ops
from .store import tasks as task_ops
from .store.requests import Op, execute
from .task import Pool, Task, TaskState

DEFAULT_LEASE = 60.0
MAX_RETRY_IN = 10 * 365 * 24 * 3600.0
MAX_RETENTION = 100 * 365 * 24 * 3600.0


def default_worker_name() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def claim_of(task: Any) -> tuple[int, str]:
    """The (id, lease token) a handle presents; refuses anything but a claimed Task."""
    if not isinstance(task, Task):
        raise ValidationError("task", f"must be a Task returned by claim, got {type(task).__name__}")
    if task.lease_token is None:
        raise ValidationError("task", f"task {task.id} carries no claim (use the Task returned by claim)")
    return task.id, task.lease_token


def settle(task: Task, state: TaskState, *, result: Any = None, error: str | None = None) -> None:
    # The token stays on the handle: a second complete/fail presents it and the
    # database refuses it with LeaseLost, exactly as for a stale claim.
    task.state = state
    task.lease_expires_at = None
    if result is not None:
        task.result = result
    if error is not None:
        task.error = error


def _check_bool(value: Any, field: str) -> bool:
    if not isinstance(value, bool):
        raise ValidationError(field, f"must be a bool, got {type(value).__name__}")
    return value


# -- enqueue ----------------------------------------------------------------
def enqueue(payload: Any, *, channel: str, **options: Any) -> Op[int]:
    """``options`` are enqueue's keywords (queue, priority, ...); build_spec checks every one."""
    spec = build_spec(payload, **options)
    task_id, _inserted = yield from enqueue_ops.enqueue_task(spec, channel)
    return task_id


def enqueue_spec(spec: TaskSpec, *, channel: str) -> Op[tuple[int, bool]]:
    """A task already checked by ``build_spec``: (id, created); created is False for a dedupe key's holder."""
    if not isinstance(spec, TaskSpec):
        raise ValidationError("spec", f"must be a TaskSpec from build_spec, got {type(spec).__name__}")
    return (yield from enqueue_ops.enqueue_task(spec, channel))


def enqueue_many(specs: Iterable[Mapping[str, Any]], *, channel: str) -> Op[list[int]]:
    if isinstance(specs, (str, bytes, Mapping)):
        raise ValidationError("specs", "must be an iterable of mappings")
    try:
        items = list(specs)
    except TypeError:
        raise ValidationError("specs", f"must be an iterable of mappings, got {type(specs).__name__}") from None
    batch = build_batch(items)
    if not len(batch):
        return []
    return (yield from enqueue_ops.insert_batch(batch, channel))


# -- claim ------------------------------------------------------------------
def claim(available: Any, limit: int, queues: Any, worker: Any, lease: Any, order: Any) -> Op[list[Task]]:
    """Claim up to ``limit`` tasks (``limit`` already checked by the caller)."""
    available = check_available(available)
    queue_list = check_queues(queues)
    worker_name = check_name(worker, "worker") if worker is not None else default_worker_name()
    lease = check_lease(lease)
    descending = check_order(order) == "max"
    return (
        yield from task_ops.claim(
            available=available, limit=limit, queues=queue_list, worker=worker_name, lease=lease, descending=descending
        )
    )


def claim_many(available: Any, limit: Any, queues: Any, worker: Any, lease: Any, order: Any) -> Op[list[Task]]:
    limit = check_int(limit, "limit", minimum=1, maximum=100_000)
    return (yield from claim(available, limit, queues, worker, lease, order))


def claim_one(available: Any, queues: Any, worker: Any, lease: Any, order: Any) -> Op[Task | None]:
    tasks = yield from claim(available, 1, queues, worker, lease, order)
    return tasks[0] if tasks else None


def peek(available: Any, queues: Any, order: Any) -> Op[Task | None]:
    """The claim function in peek mode: the same search, read-only (run with mode='rollback')."""
    available = check_available(available)
    queue_list = check_queues(queues)
    descending = check_order(order) == "max"
    yield from execute("set_read_only")
    tasks = yield from task_ops.claim(
        available=available,
        limit=1,
        queues=queue_list,
        worker="peek",
        lease=DEFAULT_LEASE,
        descending=descending,
        peek=True,
    )
    return (yield from task_ops.get(tasks[0].id)) if tasks else None


# -- holders of a claim -----------------------------------------------------
def heartbeat(task: Task, lease: float | None) -> Op[None]:
    task_id, token = claim_of(task)
    lease = None if lease is None else check_lease(lease)
    beat = yield from task_ops.heartbeat(task_id, token, lease)
    if beat is None:
        raise LeaseLost(task_id, "heartbeat")
    task.lease_expires_at = beat.lease_expires_at
    task.cancel_requested = beat.cancel_requested


def heartbeat_many(tasks: Iterable[Task], lease: float | None) -> Op[list[Task]]:
    items = list(tasks)
    claims = [claim_of(t) for t in items]
    lease = None if lease is None else check_lease(lease)
    beats = yield from task_ops.heartbeat_many(claims, lease)
    lost = []
    for task in items:
        beat = beats.get(task.id)
        if beat is None:
            lost.append(task)
        else:
            task.lease_expires_at = beat.lease_expires_at
            task.cancel_requested = beat.cancel_requested
    return lost


def complete(task: Task, result: Any, *, channel: str) -> Op[None]:
    task_id, token = claim_of(task)
    result_json = None if result is None else encode_json(result, "result")
    outcome = yield from task_ops.complete(task_id, token, result_json, channel,  # it wakes the workers itself
                                           pooled=task.pool is not None)
    if outcome is None:
        raise LeaseLost(task_id, "complete")
    settle(task, outcome.state, result=result)


def complete_many(items: Iterable[tuple[Task, Any]], *, channel: str) -> Op[list[int]]:
    pairs = list(items)
    claims = []
    for pair in pairs:
        if not isinstance(pair, tuple) or len(pair) != 2:
            raise ValidationError("items", "must be (task, result) pairs")
        task, result = pair
        task_id, token = claim_of(task)
        claims.append((task_id, token, None if result is None else encode_json(result, "result")))
    if not claims:
        return []
    states, freed = yield from task_ops.complete_many(claims)
    if freed:
        yield from enqueue_ops.notify(channel)
    lost = []
    for task, result in pairs:
        state = states.get(task.id)
        if state is None:
            lost.append(task.id)
        else:
            settle(task, state, result=result)
    return lost


def fail(task: Task, error: Any, *, retry: Any, retry_in: float | None, channel: str) -> Op[None]:
    task_id, token = claim_of(task)
    text = check_error_text(error)
    retry = _check_bool(retry, "retry")
    if retry_in is None:
        delay = backoff_seconds(task.attempts)
    else:
        delay = check_number(retry_in, "retry_in", minimum=0.0, maximum=MAX_RETRY_IN)
    outcome = yield from task_ops.fail(task_id, token, text, retry=retry, retry_in=delay, channel=channel)
    if outcome is None:
        raise LeaseLost(task_id, "fail")
    settle(task, outcome.state, error=text)
    if outcome.run_at is not None and outcome.state in ("queued", "scheduled"):
        task.run_at = outcome.run_at


def release(task: Task, reason: Any, *, channel: str) -> Op[None]:
    task_id, token = claim_of(task)
    if not isinstance(reason, str):
        raise ValidationError("reason", f"must be a str, got {type(reason).__name__}")
    outcome = yield from task_ops.requeue(task_id, token, check_error_text(reason), channel)
    if outcome is None:
        raise LeaseLost(task_id, "release")
    settle(task, outcome.state)


# -- by id ------------------------------------------------------------------
def cancel(task_id: Any) -> Op[bool]:
    task_id = check_task_id(task_id)
    return (yield from task_ops.cancel(task_id)) is not None


def retry(task_id: Any, *, channel: str) -> Op[str | None]:
    """A failed task back to queued with a fresh attempt budget; its queue, or None if it was not failed."""
    task_id = check_task_id(task_id)
    queue = yield from task_ops.retry(task_id)
    if queue is not None:
        yield from enqueue_ops.notify(channel)
    return queue


def get(task_id: Any) -> Op[Task | None]:
    task_id = check_task_id(task_id)
    return (yield from task_ops.get(task_id))


def find_tasks(
    *,
    states: Any,
    queue: Any = None,
    payload: Any = None,
    priority: Any = None,
    required: Any = None,
    pool: Any = None,
    dedupe_key: Any = None,
    limit: Any = 1000,
) -> Op[list[Task]]:
    """Tasks matching every filter given (None: any), oldest first; ``payload`` matches by JSON containment.

    ``states``: None, one state, or several.
    """
    state_list: list[str] | None = None
    if states is not None:
        names = [states] if isinstance(states, str) else list(states)
        if not names or None in names:
            raise ValidationError("state", f"must be a state or a non-empty list of states, got {states!r}")
        state_list = sorted({str(check_state(name)) for name in names})
    return (
        yield from task_ops.find(
            states=state_list,
            queue=check_optional_name(queue, "queue"),
            payload_json=None if payload is None else encode_json(payload, "payload"),
            priority=None if priority is None else check_int(priority, "priority"),
            required=None if required is None else check_int(required, "required", minimum=0),
            pool=check_optional_name(pool, "pool"),
            dedupe_key=check_optional_name(dedupe_key, "dedupe_key"),
            limit=check_int(limit, "limit", minimum=1, maximum=1_000_000),
        )
    )


def make_scheduled_due(queues: Any) -> Op[int]:
    """Every scheduled task of ``queues`` (None: all) due now, for a test that does not wait for the clock."""
    return (yield from task_ops.make_scheduled_due(check_queues(queues)))


def list_tasks(state: Any, queue: Any, limit: Any) -> Op[list[Task]]:
    state = check_state(state)
    queue = check_optional_name(queue, "queue")
    limit = check_int(limit, "limit", minimum=1, maximum=1_000_000)
    return (yield from task_ops.list_tasks(state=state, queue=queue, limit=limit))


# -- pools ------------------------------------------------------------------
def set_pool_limit(pool: Any, limit: Any, *, channel: str) -> Op[None]:
    pool = check_name(pool, "pool")
    limit = check_pool_limit(limit)
    yield from pool_ops.set_pool_limit(pool, limit)
    yield from enqueue_ops.notify(channel)


def pools() -> Op[list[Pool]]:
    return (yield from pool_ops.pools())


def pool(name: Any) -> Op[Pool | None]:
    name = check_name(name, "pool")
    return (yield from pool_ops.get_pool(name))


# -- maintenance and inspection ---------------------------------------------
def rescue_expired(*, channel: str) -> Op[int]:
    rescued = yield from task_ops.rescue_expired()
    if rescued:
        yield from enqueue_ops.notify(channel)
    return len(rescued)


def prune(older_than: Any, batch: Any) -> Op[int]:
    older_than = check_number(older_than, "older_than", minimum=0.0, maximum=MAX_RETENTION)
    batch = check_int(batch, "batch", minimum=1, maximum=1_000_000)
    return (yield from admin.prune_finished(older_than, batch))


def next_run_in() -> Op[float | None]:
    return (yield from admin.next_run_in())


def stats() -> Op[Stats]:
    return (yield from admin.stats())


def check_repair_flag(repair: Any) -> bool:
    return _check_bool(repair, "repair")
