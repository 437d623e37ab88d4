"""``TaskQueue``: the public API. It validates, then calls the store in one transaction."""

from __future__ import annotations

import contextlib
import datetime as dt
import os
import socket
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection
from sqlalchemy.orm import Session

from . import migrate as _migrate
from .dsn import resolve_dsn, to_libpq, to_sqlalchemy_url
from .errors import DuplicateTask, LeaseLost, TaskQueueError, ValidationError
from .counters import Counters
from .invariants import CheckReport
from .invariants import check as run_check
from .registry import list_workers
from .retry import backoff_seconds
from .schema import SCHEMA_DEFAULT, check_schema_name
from .spec import (
    ORDERS,
    STATES_FILTER,
    build_batch,
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
    check_task_id,
    encode_json,
)
from .store import Store, configure_engine
from .task import Pool, Task, WorkerInfo

DEFAULT_LEASE = 60.0


def default_worker_name() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


class TaskQueue:
    """A handle on one queue schema in one PostgreSQL database.

    Thread-safe: each call takes a pooled connection for one transaction.
    """

    def __init__(
        self,
        dsn: str | None = None,
        *,
        schema: str = SCHEMA_DEFAULT,
        pool_size: int = 5,
        max_overflow: int = 10,
    ) -> None:
        self.schema = check_schema_name(schema)
        self.dsn = to_libpq(resolve_dsn(dsn))
        self.store = Store(self.schema)
        self.engine = sa.create_engine(
            to_sqlalchemy_url(self.dsn),
            pool_size=pool_size,
            max_overflow=max_overflow,
            connect_args={"application_name": "taskqueue", "connect_timeout": 10},
        )
        configure_engine(self.engine, self.schema)
        # Same pool; for work that is one statement, so it needs no BEGIN/COMMIT.
        self._autocommit_engine = self.engine.execution_options(isolation_level="AUTOCOMMIT")
        #: What this handle did (claims, completions, ...), for taskqueue.metrics.
        self.counters = Counters()

    # -- lifecycle ----------------------------------------------------------
    def close(self) -> None:
        self.engine.dispose()

    def __enter__(self) -> TaskQueue:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"TaskQueue(schema={self.schema!r})"

    def migrate(self) -> None:
        """Bring the schema to the newest revision; safe to call from many processes at once."""
        _migrate.upgrade(self.engine, self.schema)

    @contextlib.contextmanager
    def transaction(self, connection: Connection | Session | None = None) -> Iterator[Connection]:
        """One transaction: ours (committed on success), or the caller's (left open)."""
        if connection is None:
            with self.engine.begin() as conn:
                yield conn
            return
        if isinstance(connection, Session):
            conn = connection.connection()
        elif isinstance(connection, Connection):
            conn = connection
        else:
            raise ValidationError(
                "connection", f"must be a SQLAlchemy Connection or Session, got {type(connection).__name__}"
            )
        with self.store.on_foreign_connection(conn):
            yield conn

    @contextlib.contextmanager
    def _single_statement(self, connection: Connection | Session | None) -> Iterator[Connection]:
        """For work done in one statement: autocommit on our own connection, else the caller's transaction."""
        if connection is not None:
            with self.transaction(connection) as conn:
                yield conn
            return
        with self._autocommit_engine.connect() as conn:
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
        """
        spec = build_spec(
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
        )
        with self._single_statement(connection) as conn:
            task_id, _inserted = self.store.enqueue_task(conn, spec)
        return task_id

    def enqueue_many(
        self, specs: Iterable[Mapping[str, Any]], *, connection: Connection | Session | None = None
    ) -> list[int]:
        """Add many tasks in one transaction; all or nothing. Ids come back in input order."""
        if isinstance(specs, (str, bytes, Mapping)):
            raise ValidationError("specs", "must be an iterable of mappings")
        try:
            items = list(specs)
        except TypeError:
            raise ValidationError("specs", f"must be an iterable of mappings, got {type(specs).__name__}") from None
        batch = build_batch(items)
        if not len(batch):
            return []
        with self.transaction(connection) as conn:
            self.store.ensure_pools(conn, [pool for pool in set(batch.pools) if pool is not None])
            ids = self.store.insert_batch(conn, batch)
            self.store.notify(conn)
        return ids

    # -- claim --------------------------------------------------------------
    def claim(
        self,
        *,
        available: int | None = None,
        queues: Iterable[str] | None = None,
        worker: str | None = None,
        lease: float = DEFAULT_LEASE,
        order: str = "min",
    ) -> Task | None:
        """Claim the best task that fits ``available``: smallest (priority, id), or largest priority with order='max'."""
        tasks = self._claim(available, 1, queues, worker, lease, order)
        return tasks[0] if tasks else None

    def claim_many(
        self,
        *,
        available: int | None = None,
        limit: int = 100,
        queues: Iterable[str] | None = None,
        worker: str | None = None,
        lease: float = DEFAULT_LEASE,
        order: str = "min",
    ) -> list[Task]:
        """Claim up to ``limit`` tasks in priority order, packing them into ``available``."""
        limit = check_int(limit, "limit", minimum=1, maximum=100_000)
        return self._claim(available, limit, queues, worker, lease, order)

    def _claim(
        self,
        available: Any,
        limit: int,
        queues: Any,
        worker: Any,
        lease: Any,
        order: Any,
    ) -> list[Task]:
        available = check_available(available)
        queue_list = check_queues(queues)
        worker_name = check_name(worker, "worker") if worker is not None else default_worker_name()
        lease = check_lease(lease)
        descending = check_order(order) == "max"
        with self.engine.begin() as conn:
            tasks = self.store.claim(
                conn,
                available=available,
                limit=limit,
                queues=queue_list,
                worker=worker_name,
                lease=lease,
                descending=descending,
            )
        self.counters.claimed(tasks)
        return tasks

    def peek(
        self, *, available: int | None = None, queues: Iterable[str] | None = None, order: str = "min"
    ) -> Task | None:
        """What ``claim`` would return now, without claiming it.

        The claim function itself answers, in peek mode: the same search, so it
        cannot drift from the real rule (pools, fit, order), but read-only. It
        locks no row, writes nothing (no promotion, no parking) and waits on no
        lock; it runs in a READ ONLY transaction to prove it.
        """
        available = check_available(available)
        queue_list = check_queues(queues)
        descending = check_order(order) == "max"
        with self.engine.connect() as conn:
            self.store.read_only(conn)
            tasks = self.store.claim(
                conn,
                available=available,
                limit=1,
                queues=queue_list,
                worker="peek",
                lease=DEFAULT_LEASE,
                descending=descending,
                peek=True,
            )
            task = self.store.get(conn, tasks[0].id) if tasks else None
            conn.rollback()
        return task

    # -- holders of a claim -------------------------------------------------
    def heartbeat(self, task: Task, *, lease: float | None = None) -> None:
        """Extend the claim's lease (by its own length, or to now() + ``lease``)."""
        task_id, token = _claim_of(task)
        lease = None if lease is None else check_lease(lease)
        with self.engine.begin() as conn:
            beat = self.store.heartbeat(conn, task_id, token, lease)
        if beat is None:
            self.counters.add_process("lost_leases")
            raise LeaseLost(task_id, "heartbeat")
        task.lease_expires_at = beat.lease_expires_at
        task.cancel_requested = beat.cancel_requested

    def heartbeat_many(self, tasks: Iterable[Task], *, lease: float | None = None) -> list[Task]:
        """Extend many leases in one round trip; return the tasks whose lease is lost."""
        items = list(tasks)
        claims = [_claim_of(t) for t in items]
        lease = None if lease is None else check_lease(lease)
        with self.engine.begin() as conn:
            beats = self.store.heartbeat_many(conn, claims, lease)
        lost = []
        for task in items:
            beat = beats.get(task.id)
            if beat is None:
                lost.append(task)
            else:
                task.lease_expires_at = beat.lease_expires_at
                task.cancel_requested = beat.cancel_requested
        self.counters.add_process("lost_leases", len(lost))
        return lost

    def complete(self, task: Task, result: Any = None, *, connection: Connection | Session | None = None) -> None:
        """Finish the claim as done. With ``connection=``, it commits with the caller's own writes."""
        task_id, token = _claim_of(task)
        result_json = None if result is None else encode_json(result, "result")
        with self.transaction(connection) as conn:
            outcome = self.store.complete(conn, task_id, token, result_json)
            if outcome is None:
                self.counters.add_process("lost_leases")
                raise LeaseLost(task_id, "complete")
            if outcome.freed_full_pool:
                self.store.notify(conn)
        self.counters.add("completions", task.queue)
        _settle(task, outcome.state, result=result)

    def complete_many(
        self, items: Iterable[tuple[Task, Any]], *, connection: Connection | Session | None = None
    ) -> list[int]:
        """Finish many claims as done in one transaction; return the ids whose lease was lost.

        One statement for the tasks and one per batch for the pools (released in
        name order), so a worker can complete a whole batch in one commit.
        """
        pairs = list(items)
        claims = []
        for pair in pairs:
            if not isinstance(pair, tuple) or len(pair) != 2:
                raise ValidationError("items", "must be (task, result) pairs")
            task, result = pair
            task_id, token = _claim_of(task)
            claims.append((task_id, token, None if result is None else encode_json(result, "result")))
        if not claims:
            return []
        with self.transaction(connection) as conn:
            states, freed = self.store.complete_many(conn, claims)
            if freed:
                self.store.notify(conn)
        lost = []
        for task, result in pairs:
            state = states.get(task.id)
            if state is None:
                lost.append(task.id)
            else:
                self.counters.add("completions", task.queue)
                _settle(task, state, result=result)
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
        task_id, token = _claim_of(task)
        text = check_error_text(error)
        if not isinstance(retry, bool):
            raise ValidationError("retry", f"must be a bool, got {type(retry).__name__}")
        if retry_in is None:
            delay = backoff_seconds(task.attempts)
        else:
            delay = check_number(retry_in, "retry_in", minimum=0.0, maximum=10 * 365 * 24 * 3600.0)
        with self.transaction(connection) as conn:
            outcome = self.store.fail(conn, task_id, token, text, retry=retry, retry_in=delay)
            if outcome is None:
                self.counters.add_process("lost_leases")
                raise LeaseLost(task_id, "fail")
            if outcome.freed_full_pool or outcome.state == "queued":
                self.store.notify(conn)
        self.counters.add("failures", task.queue)
        if outcome.state in ("queued", "scheduled"):
            self.counters.add("retries", task.queue, kind="backoff")
        _settle(task, outcome.state, error=text)
        if outcome.run_at is not None and outcome.state in ("queued", "scheduled"):
            task.run_at = outcome.run_at

    def release(self, task: Task, *, reason: str = "released by its worker") -> None:
        """Give a running task back to the queue without using up an attempt (worker shutdown)."""
        task_id, token = _claim_of(task)
        if not isinstance(reason, str):
            raise ValidationError("reason", f"must be a str, got {type(reason).__name__}")
        with self.engine.begin() as conn:
            outcome = self.store.requeue(conn, task_id, token, check_error_text(reason))
            if outcome is None:
                self.counters.add_process("lost_leases")
                raise LeaseLost(task_id, "release")
            self.store.notify(conn)
        _settle(task, outcome.state)

    # -- by id --------------------------------------------------------------
    def cancel(self, task_id: int) -> bool:
        """Cancel a waiting task now, or ask a running task's holder to stop. False if already finished."""
        task_id = check_task_id(task_id)
        with self.engine.begin() as conn:
            return self.store.cancel(conn, task_id) is not None

    def retry(self, task_id: int) -> bool:
        """Re-enqueue a failed task with a fresh attempt budget. False if it is not failed (or unknown).

        Raises DuplicateTask when a live task already holds its dedupe key.
        """
        task_id = check_task_id(task_id)
        try:
            with self.engine.begin() as conn:
                queue = self.store.retry(conn, task_id)
                if queue is not None:
                    self.store.notify(conn)
        except sa.exc.IntegrityError as exc:
            if getattr(getattr(exc.orig, "diag", None), "constraint_name", None) != "uq_tasks_dedupe":
                raise
            task = self.get(task_id)
            raise DuplicateTask(task_id, task.queue if task else "?", task.dedupe_key if task else None) from None
        if queue is None:
            return False
        self.counters.add("retries", queue, kind="operator")
        return True

    def get(self, task_id: int) -> Task | None:
        task_id = check_task_id(task_id)
        with self.engine.begin() as conn:
            return self.store.get(conn, task_id)

    def tasks(self, *, state: str | None = None, queue: str | None = None, limit: int = 50) -> list[Task]:
        """The newest tasks, optionally of one state and queue."""
        if state is not None and state not in STATES_FILTER:
            raise ValidationError("state", f"must be one of {', '.join(STATES_FILTER)}, got {state!r}")
        queue = check_optional_name(queue, "queue")
        limit = check_int(limit, "limit", minimum=1, maximum=1_000_000)
        with self.engine.begin() as conn:
            return self.store.list_tasks(conn, state=state, queue=queue, limit=limit)

    # -- pools --------------------------------------------------------------
    def set_pool_limit(self, pool: str, limit: int | None) -> None:
        """Cap the pool's running tasks at ``limit`` (None: no limit). Lowering never stops running tasks."""
        pool = check_name(pool, "pool")
        limit = check_pool_limit(limit)
        with self.engine.begin() as conn:
            self.store.set_pool_limit(conn, pool, limit)
            self.store.notify(conn)

    def pools(self) -> list[Pool]:
        with self.engine.begin() as conn:
            return self.store.pools(conn)

    def pool(self, name: str) -> Pool | None:
        name = check_name(name, "pool")
        with self.engine.begin() as conn:
            return self.store.get_pool(conn, name)

    # -- maintenance and inspection ---------------------------------------
    def rescue_expired(self) -> int:
        """Requeue (or fail, when out of attempts) every task whose lease expired."""
        with self.engine.begin() as conn:
            rescued = self.store.rescue_expired(conn)
            if rescued:
                self.store.notify(conn)
        self.counters.add_process("rescues", len(rescued))
        return len(rescued)

    def prune(self, *, older_than: float = 7 * 24 * 3600.0, batch: int = 10_000) -> int:
        """Delete finished tasks older than ``older_than`` seconds; returns how many."""
        older_than = check_number(older_than, "older_than", minimum=0.0, maximum=100 * 365 * 24 * 3600.0)
        batch = check_int(batch, "batch", minimum=1, maximum=1_000_000)
        with self.engine.begin() as conn:
            return self.store.prune_finished(conn, older_than, batch)

    def next_run_in(self) -> float | None:
        """Seconds until the earliest scheduled task is due (negative if overdue), or None."""
        with self.engine.begin() as conn:
            return self.store.next_run_in(conn)

    def check(self, *, repair: bool = False) -> CheckReport:
        """Check the invariants in one snapshot; with ``repair``, fix what can be fixed and check again."""
        if not isinstance(repair, bool):
            raise ValidationError("repair", f"must be a bool, got {type(repair).__name__}")
        return run_check(self.engine, self.store, repair=repair)

    def workers(self, *, include_dead: bool = False) -> list[WorkerInfo]:
        """The worker registry: live workers with their reservations (dead ones too with ``include_dead``)."""
        if not isinstance(include_dead, bool):
            raise ValidationError("include_dead", f"must be a bool, got {type(include_dead).__name__}")
        return list_workers(self, include_dead=include_dead)

    def stats(self) -> dict[str, Any]:
        """Counts by state (every state, zeros included), by queue and priority; pools; throughput."""
        with self.engine.begin() as conn:
            return self.store.stats(conn)


def _claim_of(task: Any) -> tuple[int, str]:
    if not isinstance(task, Task):
        raise ValidationError("task", f"must be a Task returned by claim, got {type(task).__name__}")
    if task.lease_token is None:
        raise ValidationError("task", f"task {task.id} carries no claim (use the Task returned by claim)")
    return task.id, task.lease_token


def _settle(task: Task, state: str, *, result: Any = None, error: str | None = None) -> None:
    # The token stays on the handle: a second complete/fail presents it and the
    # database refuses it with LeaseLost, exactly as for a stale claim.
    task.state = state
    task.lease_expires_at = None
    if result is not None:
        task.result = result
    if error is not None:
        task.error = error


__all__ = ["TaskQueue", "DEFAULT_LEASE", "ORDERS", "TaskQueueError"]
