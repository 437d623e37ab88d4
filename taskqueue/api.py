"""Every public queue method, once, as a plan (see :mod:`taskqueue.plan`).

``TaskQueue`` binds each with :func:`~taskqueue.plan.blocking` and
``AsyncTaskQueue`` with :func:`~taskqueue.plan.awaiting`: one signature, one
docstring, one set of rules. What runs on the connection is in
:mod:`taskqueue.operations`; what is here is what a method adds around it:
the transaction mode, the handle's counters, the errors it turns into others.

``connection=`` is the caller's own transaction: a SQLAlchemy ``Connection``
or ``Session`` for ``TaskQueue``, an ``AsyncConnection`` or ``AsyncSession``
for ``AsyncTaskQueue``. The task then commits (or rolls back) with the
caller's writes.
"""

from __future__ import annotations

import datetime as dt
import random
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any, TypeAlias, TypeVar

from . import operations as ops
from .dberrors import lock_transient
from .errors import DatabaseError, DuplicateTask, LeaseLost, ValidationError
from .invariants import CheckReport, check_plan
from .operations import DEFAULT_LEASE
from .plan import Plan, QueueHandle, Run, retrying
from .spec import TaskSpec
from .stats import Stats
from .store import registry as registry_ops
from .store.requests import Op
from .task import EnqueueSpec, Order, Pool, Task, TaskState, WorkerInfo

if TYPE_CHECKING:
    from sqlalchemy.engine import Connection
    from sqlalchemy.ext.asyncio import AsyncConnection, AsyncSession
    from sqlalchemy.orm import Session

    from .db import Mode

#: The caller's transaction, or None for a connection of the queue's own.
Connectable: TypeAlias = "Connection | Session | AsyncConnection | AsyncSession | None"


T = TypeVar("T")

#: How many times a state change on the queue's own connection runs when a
#: deadlock (or a lock timeout) rolls it back.
LOCK_ATTEMPTS = 5


def _lock_delay(attempt: int) -> float:
    """A few milliseconds, growing and jittered, so the two sides of a deadlock do not meet again in step."""
    return random.uniform(0.0, 0.005 * attempt)


def _changing(q: QueueHandle, make: Callable[[], Op[T]], connection: Connectable, mode: Mode) -> Plan[T]:
    """A state change that runs again when PostgreSQL breaks a deadlock by rolling it back.

    A claim waits for its first pool's row while holding task rows, and a
    release holds that pool's row while its trigger unparks the pool's
    tasks; a row locked by a claim's READ COMMITTED recheck can close the
    circle (see docs/architecture.md, "Deadlocks"). The transaction that
    PostgreSQL picks is rolled back whole, so running it again is safe. In
    the caller's own transaction (``connection=``), the error is the caller's.
    """
    if connection is not None:
        theirs: T = yield Run(make(), connection, mode)
        return theirs

    def counted(exc: BaseException) -> bool:
        if not lock_transient(exc):
            return False
        q.counters.add_process("lock_retries")
        return True

    result: T = yield from retrying(
        lambda: Run(make(), None, mode), retryable=counted, attempts=LOCK_ATTEMPTS, delay=_lock_delay
    )
    return result


def _replayable(queues: Iterable[str] | None) -> Iterable[str] | None:
    """A one-shot iterator of queue names, read once, so a retry asks for the same queues."""
    return tuple(queues) if isinstance(queues, Iterator) else queues


def _counting_lost_leases(q: QueueHandle, make: Callable[[], Op[None]], connection: Connectable = None) -> Plan[None]:
    """One claim's state change: a single statement, so on the queue's own
    connection it runs without BEGIN/COMMIT (one round trip, not three). The
    statement sends its own wake-up (pg_notify, delivered at its commit)."""
    try:
        yield from _changing(q, make, connection, "autocommit")
    except LeaseLost:
        q.counters.add_process("lost_leases")
        raise


# -- enqueue ----------------------------------------------------------------
def enqueue(
    q: QueueHandle,
    payload: Any,
    *,
    queue: str = "default",
    priority: int = 0,
    required: int = 0,
    pool: str | None = None,
    run_at: dt.datetime | None = None,
    delay: float | None = None,
    max_attempts: int = 3,
    dedupe_key: str | None = None,
    estimate: float | None = None,
    connection: Connectable = None,
) -> Plan[int]:
    """Add one task and return its id (or the id of the active task holding ``dedupe_key``).

    ``estimate``: expected run time in seconds, for the scheduling policies
    (default: what the queue's finished tasks took, learnt on completion).

    One statement: on a connection of the queue's own, one autocommit round trip.
    """
    op = ops.enqueue(
        payload,
        queue=queue,
        priority=priority,
        required=required,
        pool=pool,
        run_at=run_at,
        delay=delay,
        max_attempts=max_attempts,
        dedupe_key=dedupe_key,
        estimate=estimate,
        channel=q.channel,
    )
    task_id: int = yield Run(op, connection, "autocommit")
    return task_id


def enqueue_spec(q: QueueHandle, spec: TaskSpec, *, connection: Connectable = None) -> Plan[tuple[int, bool]]:
    """Add a task checked by ``build_spec``; ``(id, False)`` when an active task held its dedupe key.

    The command line checks its input before it connects, then says whether the task is new.
    """
    result: tuple[int, bool] = yield Run(ops.enqueue_spec(spec, channel=q.channel), connection, "autocommit")
    return result


def enqueue_many(q: QueueHandle, specs: Iterable[EnqueueSpec], *, connection: Connectable = None) -> Plan[list[int]]:
    """Add many tasks in one transaction; all or nothing. Ids come back in input order."""
    ids: list[int] = yield Run(ops.enqueue_many(specs, channel=q.channel), connection)
    return ids


# -- claim --------------------------------------------------------------------
def claim(
    q: QueueHandle,
    *,
    available: int | None = None,
    queues: Iterable[str] | None = None,
    worker: str | None = None,
    lease: float = DEFAULT_LEASE,
    order: Order = "min",
) -> Plan[Task | None]:
    """Claim the best task that fits ``available``: smallest (priority, id), or largest priority with 'max'."""
    # One statement (the claim function): atomic alone, so no BEGIN/COMMIT round trips.
    queues = _replayable(queues)
    task: Task | None = yield from _changing(
        q, lambda: ops.claim_one(available, queues, worker, lease, order), None, "autocommit"
    )
    q.counters.claimed([] if task is None else [task])
    return task


def claim_many(
    q: QueueHandle,
    *,
    available: int | None = None,
    limit: int = 100,
    queues: Iterable[str] | None = None,
    worker: str | None = None,
    lease: float = DEFAULT_LEASE,
    order: Order = "min",
) -> Plan[list[Task]]:
    """Claim up to ``limit`` tasks in priority order, packing them into ``available``."""
    queues = _replayable(queues)
    tasks: list[Task] = yield from _changing(
        q, lambda: ops.claim_many(available, limit, queues, worker, lease, order), None, "autocommit"
    )
    q.counters.claimed(tasks)
    return tasks


def peek(
    q: QueueHandle, *, available: int | None = None, queues: Iterable[str] | None = None, order: Order = "min"
) -> Plan[Task | None]:
    """What ``claim`` would return now, without claiming it.

    The claim function itself answers, in peek mode: the same search, so it
    cannot drift from the real rule (pools, fit, order), but read-only. It
    locks no row, writes nothing (no promotion, no parking) and waits on no
    lock; it runs in a READ ONLY transaction to prove it.
    """
    task: Task | None = yield Run(ops.peek(available, queues, order), mode="rollback")
    return task


# -- holders of a claim -------------------------------------------------------
def heartbeat(q: QueueHandle, task: Task, *, lease: float | None = None) -> Plan[None]:
    """Extend the claim's lease (by its own length, or to now() + ``lease``)."""
    yield from _counting_lost_leases(q, lambda: ops.heartbeat(task, lease))


def heartbeat_many(q: QueueHandle, tasks: Iterable[Task], *, lease: float | None = None) -> Plan[list[Task]]:
    """Extend many leases in one round trip; return the tasks whose lease is lost."""
    lost: list[Task] = yield Run(ops.heartbeat_many(tasks, lease), mode="autocommit")
    q.counters.add_process("lost_leases", len(lost))
    return lost


def complete(q: QueueHandle, task: Task, result: Any = None, *, connection: Connectable = None) -> Plan[None]:
    """Finish the claim as done. With ``connection=``, it commits with the caller's own writes."""
    yield from _counting_lost_leases(q, lambda: ops.complete(task, result, channel=q.channel), connection)
    q.counters.add("completions", task.queue)


def complete_many(
    q: QueueHandle, items: Iterable[tuple[Task, Any]], *, connection: Connectable = None
) -> Plan[list[int]]:
    """Finish many claims as done in one transaction; return the ids whose lease was lost.

    One statement for the tasks and one per batch for the pools (released in
    name order), so a worker can complete a whole batch in one commit.
    Without pooled tasks that is one statement, run without BEGIN/COMMIT
    round trips on a connection of the queue's own.
    """
    pairs = list(items)
    # A claim's pool never changes: the handle's tells whether pools need releasing.
    one_statement = not any(isinstance(p, tuple) and p and getattr(p[0], "pool", None) for p in pairs)
    lost: list[int] = yield from _changing(
        q, lambda: ops.complete_many(pairs, channel=q.channel), connection,
        "autocommit" if one_statement else "transaction",
    )
    gone = set(lost)
    for task, _result in pairs:
        if task.id not in gone:
            q.counters.add("completions", task.queue)
    q.counters.add_process("lost_leases", len(lost))
    return lost


def fail(
    q: QueueHandle,
    task: Task,
    error: Any,
    *,
    retry: bool = True,
    retry_in: float | None = None,
    connection: Connectable = None,
) -> Plan[None]:
    """Finish the claim with an error: retried later while attempts remain, else failed."""
    yield from _counting_lost_leases(
        q, lambda: ops.fail(task, error, retry=retry, retry_in=retry_in, channel=q.channel), connection
    )
    q.counters.add("failures", task.queue)
    if task.state in ("queued", "scheduled"):
        q.counters.add("retries", task.queue, kind="backoff")


def release(q: QueueHandle, task: Task, *, reason: str = "released by its worker") -> Plan[None]:
    """Give a running task back to the queue without using up an attempt (worker shutdown)."""
    yield from _counting_lost_leases(q, lambda: ops.release(task, reason, channel=q.channel))


# -- by id --------------------------------------------------------------------
def cancel(q: QueueHandle, task_id: int) -> Plan[bool]:
    """Cancel a waiting task now, or ask a running task's holder to stop. False if already finished."""
    cancelled: bool = yield from _changing(q, lambda: ops.cancel(task_id), None, "transaction")
    return cancelled


def retry(q: QueueHandle, task_id: int) -> Plan[bool]:
    """Re-enqueue a failed task with a fresh attempt budget. False if it is not failed (or unknown).

    Raises DuplicateTask when a live task already holds its dedupe key.
    """
    try:
        queue: str | None = yield Run(ops.retry(task_id, channel=q.channel))
    except DatabaseError as exc:
        if getattr(getattr(exc.__cause__, "diag", None), "constraint_name", None) != "uq_tasks_dedupe":
            raise
        task = yield from get(q, task_id)
        raise DuplicateTask(task_id, task.queue if task else "?", task.dedupe_key if task else None) from None
    if queue is None:
        return False
    q.counters.add("retries", queue, kind="operator")
    return True


def get(q: QueueHandle, task_id: int) -> Plan[Task | None]:
    """The task with this id, or None."""
    task: Task | None = yield Run(ops.get(task_id))
    return task


def tasks(
    q: QueueHandle, *, state: TaskState | None = None, queue: str | None = None, limit: int = 50
) -> Plan[list[Task]]:
    """The newest tasks, optionally of one state and queue."""
    found: list[Task] = yield Run(ops.list_tasks(state, queue, limit))
    return found


# -- pools --------------------------------------------------------------------
def set_pool_limit(q: QueueHandle, pool: str, limit: int | None) -> Plan[None]:
    """Cap the pool's running tasks at ``limit`` (None: no limit). Lowering never stops running tasks."""
    yield from _changing(q, lambda: ops.set_pool_limit(pool, limit, channel=q.channel), None, "transaction")


def pools(q: QueueHandle) -> Plan[list[Pool]]:
    """Every pool, with its limit and running count."""
    found: list[Pool] = yield Run(ops.pools())
    return found


def pool(q: QueueHandle, name: str) -> Plan[Pool | None]:
    """One pool by name, or None."""
    found: Pool | None = yield Run(ops.pool(name))
    return found


# -- maintenance and inspection -------------------------------------------
def rescue_expired(q: QueueHandle) -> Plan[int]:
    """Requeue (or fail, when out of attempts) every task whose lease expired."""
    rescued: int = yield from _changing(q, lambda: ops.rescue_expired(channel=q.channel), None, "transaction")
    q.counters.add_process("rescues", rescued)
    return rescued


def prune(q: QueueHandle, *, older_than: float = 7 * 24 * 3600.0, batch: int = 10_000) -> Plan[int]:
    """Delete finished tasks older than ``older_than`` seconds; returns how many."""
    deleted: int = yield Run(ops.prune(older_than, batch))
    return deleted


def next_run_in(q: QueueHandle) -> Plan[float | None]:
    """Seconds until the earliest scheduled task is due (negative if overdue), or None."""
    seconds: float | None = yield Run(ops.next_run_in())
    return seconds


def check(q: QueueHandle, *, repair: bool = False) -> Plan[CheckReport]:
    """Check the invariants in one snapshot; with ``repair``, fix what can be fixed and check again."""
    return (yield from check_plan(repair=ops.check_repair_flag(repair)))


def workers(q: QueueHandle, *, include_dead: bool = False) -> Plan[list[WorkerInfo]]:
    """The worker registry: live workers with their reservations (dead ones too with ``include_dead``)."""
    if not isinstance(include_dead, bool):
        raise ValidationError("include_dead", f"must be a bool, got {type(include_dead).__name__}")
    found: list[WorkerInfo] = yield Run(registry_ops.workers(include_dead=include_dead), mode="autocommit")
    return found


def stats(q: QueueHandle) -> Plan[Stats]:
    """Counts by state (every state, zeros included), by queue and priority; pools; throughput."""
    result: Stats = yield Run(ops.stats())
    return result
