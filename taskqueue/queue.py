"""``TaskQueue``: the sync public API. Its methods are the plans of :mod:`taskqueue.api`, performed on this thread."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, TypeVar

from sqlalchemy.engine import Connection

if TYPE_CHECKING:  # the ORM costs ~40 ms to import; a Session can only exist once it is loaded
    from sqlalchemy.orm import Session

from . import api
from . import migrate as _migrate
from .db import Database, Mode
from .dberrors import translated
from .errors import TaskQueueError
from .handle import QueueSettings
from .operations import DEFAULT_LEASE, default_worker_name
from .plan import Plan, Run, advance, blocking, first_step
from .schema import SCHEMA_DEFAULT
from .store.requests import Op
from .task import ORDERS

T = TypeVar("T")


class TaskQueue(QueueSettings):
    """A handle on one queue schema in one PostgreSQL database.

    Thread-safe: each call takes a pooled connection for one transaction.
    ``poll_only``: the DSN goes through PgBouncer in transaction mode (see
    docs/operations.md): no prepared statements, no session state, no LISTEN.
    """

    def __init__(
        self, dsn: str | None = None, *, schema: str = SCHEMA_DEFAULT, pool_size: int = 5, max_overflow: int = 10,
        poll_only: bool = False,
    ) -> None:
        super().__init__(dsn, schema, poll_only)
        self.db = Database(self.dsn, self.schema, pool_size=pool_size, max_overflow=max_overflow, poll_only=poll_only)
        self.engine = self.db.engine

    def _run(self, op: Op[T], connection: Connection | Session | None = None, *, mode: Mode = "transaction") -> T:
        return self.db.run(op, connection, mode=mode)

    def _perform(self, plan: Plan[T]) -> T:
        """Run a plan's steps one after the other on this thread (see :mod:`taskqueue.plan`)."""
        step, result = first_step(plan)
        while step is not None:
            try:
                value = None
                if isinstance(step, Run):
                    value = self.db.run(step.op, step.connection, mode=step.mode)
                else:
                    time.sleep(step.seconds)
            except Exception as exc:
                step, result = advance(plan, error=exc)
            else:
                step, result = advance(plan, value)
        return result  # type: ignore[return-value]

    # -- lifecycle ----------------------------------------------------------
    def close(self) -> None:
        self.db.dispose()

    def __enter__(self) -> TaskQueue:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def migrate(self) -> None:
        """Bring the schema to the newest revision; safe to call from many processes at once."""
        with translated():
            _migrate.upgrade(self.engine, self.schema)

    @contextlib.contextmanager
    def transaction(self, connection: Connection | Session | None = None) -> Iterator[Connection]:
        """One transaction: ours (committed on success), or the caller's (left open)."""
        with self.db.connection(connection) as conn:
            yield conn

    # -- every public method, written once in taskqueue.api ------------------
    enqueue = blocking(api.enqueue)
    enqueue_spec = blocking(api.enqueue_spec)
    enqueue_many = blocking(api.enqueue_many)
    claim = blocking(api.claim)
    claim_many = blocking(api.claim_many)
    peek = blocking(api.peek)
    heartbeat = blocking(api.heartbeat)
    heartbeat_many = blocking(api.heartbeat_many)
    complete = blocking(api.complete)
    complete_many = blocking(api.complete_many)
    fail = blocking(api.fail)
    release = blocking(api.release)
    cancel = blocking(api.cancel)
    retry = blocking(api.retry)
    get = blocking(api.get)
    tasks = blocking(api.tasks)
    set_pool_limit = blocking(api.set_pool_limit)
    pools = blocking(api.pools)
    pool = blocking(api.pool)
    rescue_expired = blocking(api.rescue_expired)
    prune = blocking(api.prune)
    next_run_in = blocking(api.next_run_in)
    check = blocking(api.check)
    workers = blocking(api.workers)
    stats = blocking(api.stats)


__all__ = ["DEFAULT_LEASE", "ORDERS", "TaskQueue", "TaskQueueError", "default_worker_name"]
