"""``TaskQueue``: the public API. Each method runs one operation of :mod:`taskqueue.operations`."""

from __future__ import annotations

import contextlib
import datetime as dt
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any, TypeVar

from sqlalchemy.engine import Connection

if TYPE_CHECKING:  # the ORM costs ~40 ms to import; a Session can only exist once it is loaded
    from sqlalchemy.orm import Session

from . import migrate as _migrate
from . import operations as ops
from .counters import Counters
from .db import Database, Mode, translated
from .dsn import resolve_dsn, to_libpq
from .errors import DatabaseError, DuplicateTask, LeaseLost, TaskQueueError, ValidationError
from .invariants import CheckReport
from .invariants import check as run_check
from .operations import DEFAULT_LEASE, default_worker_name
from .schema import SCHEMA_DEFAULT, check_schema_name, notify_channel
from .spec import TaskSpec
from .stats import Stats
from .store import registry as registry_ops
from .store.requests import Op
from .task import ORDERS, EnqueueSpec, Order, Pool, Task, TaskState, WorkerInfo

T = TypeVar("T")


class TaskQueue:
    """A handle on one queue schema in one PostgreSQL database.

    Thread-safe: each call takes a pooled connection for one transaction.
    ``poll_only``: the DSN goes through PgBouncer in transaction mode (see
    docs/operations.md): no prepared statements, no session state, no LISTEN.
    """

    def __init__(
        self,
        dsn: str | None = None,
        *,
        schema: str = SCHEMA_DEFAULT,
        pool_size: int = 5,
        max_overflow: int = 10,
        poll_only: bool = False,
    ) -> None:
        self.schema = check_schema_name(schema)
        self.dsn = to_libpq(resolve_dsn(dsn))
        self.channel = notify_channel(self.schema)
        #: Behind PgBouncer in transaction mode: no prepared statements, and workers poll instead of LISTEN.
        self.poll_only = bool(poll_only)
        self.db = Database(self.dsn, self.schema, pool_size=pool_size, max_overflow=max_overflow,
                           poll_only=self.poll_only)
        self.engine = self.db.engine
        #: What this handle did (claims, completions, ...), for taskqueue.metrics.
        self.counters = Counters()

    def _run(self, op: Op[T], connection: Connection | Session | None = None, *, mode: Mode = "transaction") -> T:
        return self.db.run(op, connection, mode=mode)

    @contextlib.contextmanager
    def _counting_lost_leases(self) -> Iterator[None]:
        try:
            yield
        except LeaseLost:
            self.counters.add_process("lost_leases")
            raise

    # -- lifecycle ----------------------------------------------------------
    def close(self) -> None:
        self.db.dispose()

    def __enter__(self) -> TaskQueue:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"TaskQueue(schema={self.schema!r})"

    def migrate(self) -> None:
        """Bring the schema to the newest revision; safe to call from many processes at once."""
        with translated():
            _migrate.upgrade(self.engine, self.schema)

    @contextlib.contextmanager
    def transaction(self, connection: Connection | Session | None = None) -> Iterator[Connection]:
        """One transaction: ours (committed on success), or the caller's (left open)."""
        with self.db.connection(connection) as conn:
            yield conn

    # -- enqueue ------------------------------------------------------------
    def enqueue(
        self,
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
        connection: Connection | Session | None = None,
    ) -> int:
        """Add one task and return its id (or the id of the active task holding ``dedupe_key``).

        ``estimate``: expected run time in seconds, for the scheduling policies
        (default: what the queue's finished tasks took, learnt on completion).

        One statement: on a connection of our own, one autocommit round trip.
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
            channel=self.channel,
        )
        return self._run(op, connection, mode="autocommit")

    def enqueue_spec(self, spec: TaskSpec, *, connection: Connection | Session | None = None) -> tuple[int, bool]:
        """Add a task checked by ``build_spec``; ``(id, False)`` when an active task held its dedupe key.

        The command line checks its input before it connects, then says whether the task is new.
        """
        return self._run(ops.enqueue_spec(spec, channel=self.channel), connection, mode="autocommit")

    def enqueue_many(
        self, specs: Iterable[EnqueueSpec], *, connection: Connection | Session | None = None
    ) -> list[int]:
        """Add many tasks in one transaction; all or nothing. Ids come back in input order."""
        return self._run(ops.enqueue_many(specs, channel=self.channel), connection)

    # -- claim --------------------------------------------------------------
    def claim(
        self,
        *,
        available: int | None = None,
        queues: Iterable[str] | None = None,
        worker: str | None = None,
        lease: float = DEFAULT_LEASE,
        order: Order = "min",
    ) -> Task | None:
        """Claim the best task that fits ``available``: smallest (priority, id), or largest priority with 'max'."""
        # One statement (the claim function): atomic alone, so no BEGIN/COMMIT round trips.
        task = self._run(ops.claim_one(available, queues, worker, lease, order), mode="autocommit")
        self.counters.claimed([] if task is None else [task])
        return task

    def claim_many(
        self,
        *,
        available: int | None = None,
        limit: int = 100,
        queues: Iterable[str] | None = None,
        worker: str | None = None,
        lease: float = DEFAULT_LEASE,
        order: Order = "min",
    ) -> list[Task]:
        """Claim up to ``limit`` tasks in priority order, packing them into ``available``."""
        tasks = self._run(ops.claim_many(available, limit, queues, worker, lease, order), mode="autocommit")
        self.counters.claimed(tasks)
        return tasks

    def peek(
        self, *, available: int | None = None, queues: Iterable[str] | None = None, order: Order = "min"
    ) -> Task | None:
        """What ``claim`` would return now, without claiming it.

        The claim function itself answers, in peek mode: the same search, so it
        cannot drift from the real rule (pools, fit, order), but read-only. It
        locks no row, writes nothing (no promotion, no parking) and waits on no
        lock; it runs in a READ ONLY transaction to prove it.
        """
        return self._run(ops.peek(available, queues, order), mode="rollback")

    # -- holders of a claim -------------------------------------------------
    def heartbeat(self, task: Task, *, lease: float | None = None) -> None:
        """Extend the claim's lease (by its own length, or to now() + ``lease``)."""
        with self._counting_lost_leases():
            self._run(ops.heartbeat(task, lease))

    def heartbeat_many(self, tasks: Iterable[Task], *, lease: float | None = None) -> list[Task]:
        """Extend many leases in one round trip; return the tasks whose lease is lost."""
        lost = self._run(ops.heartbeat_many(tasks, lease), mode="autocommit")
        self.counters.add_process("lost_leases", len(lost))
        return lost

    def complete(self, task: Task, result: Any = None, *, connection: Connection | Session | None = None) -> None:
        """Finish the claim as done. With ``connection=``, it commits with the caller's own writes."""
        with self._counting_lost_leases():
            self._run(ops.complete(task, result, channel=self.channel), connection)
        self.counters.add("completions", task.queue)

    def complete_many(
        self, items: Iterable[tuple[Task, Any]], *, connection: Connection | Session | None = None
    ) -> list[int]:
        """Finish many claims as done in one transaction; return the ids whose lease was lost.

        One statement for the tasks and one per batch for the pools (released in
        name order), so a worker can complete a whole batch in one commit.
        Without pooled tasks that is one statement, run without BEGIN/COMMIT
        round trips on a connection of our own.
        """
        pairs = list(items)
        # A claim's pool never changes: the handle's tells whether pools need releasing.
        one_statement = not any(isinstance(p, tuple) and p and getattr(p[0], "pool", None) for p in pairs)
        lost = self._run(ops.complete_many(pairs, channel=self.channel), connection,
                         mode="autocommit" if one_statement else "transaction")
        gone = set(lost)
        for task, _result in pairs:
            if task.id not in gone:
                self.counters.add("completions", task.queue)
        self.counters.add_process("lost_leases", len(lost))
        return lost

    def fail(
        self,
        task: Task,
        error: Any,
        *,
        retry: bool = True,
        retry_in: float | None = None,
        connection: Connection | Session | None = None,
    ) -> None:
        """Finish the claim with an error: retried later while attempts remain, else failed."""
        with self._counting_lost_leases():
            self._run(ops.fail(task, error, retry=retry, retry_in=retry_in, channel=self.channel), connection)
        self.counters.add("failures", task.queue)
        if task.state in ("queued", "scheduled"):
            self.counters.add("retries", task.queue, kind="backoff")

    def release(self, task: Task, *, reason: str = "released by its worker") -> None:
        """Give a running task back to the queue without using up an attempt (worker shutdown)."""
        with self._counting_lost_leases():
            self._run(ops.release(task, reason, channel=self.channel))

    # -- by id --------------------------------------------------------------
    def cancel(self, task_id: int) -> bool:
        """Cancel a waiting task now, or ask a running task's holder to stop. False if already finished."""
        return self._run(ops.cancel(task_id))

    def retry(self, task_id: int) -> bool:
        """Re-enqueue a failed task with a fresh attempt budget. False if it is not failed (or unknown).

        Raises DuplicateTask when a live task already holds its dedupe key.
        """
        try:
            queue = self._run(ops.retry(task_id, channel=self.channel))
        except DatabaseError as exc:
            if getattr(getattr(exc.__cause__, "diag", None), "constraint_name", None) != "uq_tasks_dedupe":
                raise
            task = self.get(task_id)
            raise DuplicateTask(task_id, task.queue if task else "?", task.dedupe_key if task else None) from None
        if queue is None:
            return False
        self.counters.add("retries", queue, kind="operator")
        return True

    def get(self, task_id: int) -> Task | None:
        return self._run(ops.get(task_id))

    def tasks(self, *, state: TaskState | None = None, queue: str | None = None, limit: int = 50) -> list[Task]:
        """The newest tasks, optionally of one state and queue."""
        return self._run(ops.list_tasks(state, queue, limit))

    # -- pools --------------------------------------------------------------
    def set_pool_limit(self, pool: str, limit: int | None) -> None:
        """Cap the pool's running tasks at ``limit`` (None: no limit). Lowering never stops running tasks."""
        self._run(ops.set_pool_limit(pool, limit, channel=self.channel))

    def pools(self) -> list[Pool]:
        return self._run(ops.pools())

    def pool(self, name: str) -> Pool | None:
        return self._run(ops.pool(name))

    # -- maintenance and inspection ---------------------------------------
    def rescue_expired(self) -> int:
        """Requeue (or fail, when out of attempts) every task whose lease expired."""
        rescued = self._run(ops.rescue_expired(channel=self.channel))
        self.counters.add_process("rescues", rescued)
        return rescued

    def prune(self, *, older_than: float = 7 * 24 * 3600.0, batch: int = 10_000) -> int:
        """Delete finished tasks older than ``older_than`` seconds; returns how many."""
        return self._run(ops.prune(older_than, batch))

    def next_run_in(self) -> float | None:
        """Seconds until the earliest scheduled task is due (negative if overdue), or None."""
        return self._run(ops.next_run_in())

    def check(self, *, repair: bool = False) -> CheckReport:
        """Check the invariants in one snapshot; with ``repair``, fix what can be fixed and check again."""
        return run_check(self.db, repair=ops.check_repair_flag(repair))

    def workers(self, *, include_dead: bool = False) -> list[WorkerInfo]:
        """The worker registry: live workers with their reservations (dead ones too with ``include_dead``)."""
        if not isinstance(include_dead, bool):
            raise ValidationError("include_dead", f"must be a bool, got {type(include_dead).__name__}")
        return self._run(registry_ops.workers(include_dead=include_dead), mode="autocommit")

    def stats(self) -> Stats:
        """Counts by state (every state, zeros included), by queue and priority; pools; throughput."""
        return self._run(ops.stats())


__all__ = ["DEFAULT_LEASE", "ORDERS", "TaskQueue", "TaskQueueError", "default_worker_name"]
