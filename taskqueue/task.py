"""The value types handed to and from callers: task states, claim order, a task, a pool, an enqueue spec."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import Any, Literal, TypedDict, get_args

#: A task's state; ``scheduled`` waits for its run_at.
TaskState = Literal["queued", "scheduled", "running", "done", "failed", "cancelled"]
STATES: tuple[TaskState, ...] = get_args(TaskState)
FINISHED_STATES: tuple[TaskState, ...] = ("done", "failed", "cancelled")

#: Claim order among tasks that fit: smallest priority first ("min"), or largest ("max").
Order = Literal["min", "max"]
ORDERS: tuple[Order, ...] = get_args(Order)


class _PayloadOf(TypedDict):
    payload: Any


class EnqueueSpec(_PayloadOf, total=False):
    """One task of ``enqueue_many``: ``payload`` and any of ``enqueue``'s keywords."""

    queue: str
    priority: int
    required: int
    pool: str | None
    run_at: dt.datetime | None
    delay: float | None
    max_attempts: int
    dedupe_key: str | None
    estimate: float | None


@dataclass(slots=True)
class Task:
    """One task as the database saw it when it was read.

    A task returned by ``claim`` is also a *handle*: it carries the claim's
    ``lease_token``, which heartbeat/complete/fail must present. A handle whose
    token is no longer current gets ``LeaseLost``.
    """

    id: int
    queue: str
    payload: Any
    priority: int
    required: int
    pool: str | None
    state: TaskState
    attempts: int
    max_attempts: int
    run_at: dt.datetime
    created_at: dt.datetime
    worker: str | None = None
    lease_expires_at: dt.datetime | None = None
    result: Any = None
    error: str | None = None
    dedupe_key: str | None = None
    started_at: dt.datetime | None = None
    finished_at: dt.datetime | None = None
    cancel_requested: bool = False
    lease_seconds: float | None = None
    estimate: float | None = None  # expected run time in seconds, as given at enqueue
    lease_token: str | None = field(default=None, repr=False)

    @property
    def finished(self) -> bool:
        return self.state in FINISHED_STATES


@dataclass(frozen=True, slots=True)
class Pool:
    """A concurrency pool: at most ``limit`` running tasks (None: no limit)."""

    name: str
    limit: int | None
    running: int


@dataclass(frozen=True, slots=True)
class Reservation:
    """A worker holding back capacity for one waiting task, so it can start by ``start_by``."""

    worker: str
    task_id: int
    required: int
    queue: str
    since: dt.datetime
    start_by: dt.datetime | None


@dataclass(frozen=True, slots=True)
class WorkerInfo:
    """One worker as the registry saw it at its last heartbeat.

    ``alive`` is false once ``expires_at`` has passed; such a row is kept for a
    while for operators, but nothing treats it as a worker any more.
    """

    name: str
    host: str
    pid: int
    queues: tuple[str, ...] | None  # None: every queue
    capacity: int | None  # None: no bound
    in_use: int
    running: int
    policy: str
    started_at: dt.datetime
    last_seen_at: dt.datetime
    expires_at: dt.datetime
    alive: bool
    reservation: Reservation | None = None
