"""taskqueue: a durable task queue in PostgreSQL.

Priorities, resource-fit claims, concurrency pools, leases with fencing
tokens, retries and delays; every state change is one transaction.

``TaskQueue``, ``Worker`` and ``CheckReport`` are imported on first use: they
bring SQLAlchemy and psycopg, and the ``taskqueue`` command must start fast
for the commands that need neither (``--help``, ``pool-of``, ``embedded``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .errors import (
    DatabaseError,
    DuplicateTask,
    LeaseLost,
    Permanent,
    Retry,
    ServiceFailed,
    TaskQueueError,
    ValidationError,
)
from .lazy import lazy_exports
from .network import network_pool
from .stats import PoolStats, Stats, WaitingGroup
from .task import EnqueueSpec, Order, Pool, Reservation, Task, TaskState, WorkerInfo

if TYPE_CHECKING:
    from .aio import AsyncTaskQueue
    from .invariants import CheckReport
    from .queue import TaskQueue
    from .worker import Worker

_LAZY = {
    "AsyncTaskQueue": ".aio",
    "CheckReport": ".invariants",
    "TaskQueue": ".queue",
    "Worker": ".worker",
}

__all__ = [
    "AsyncTaskQueue",
    "CheckReport",
    "DatabaseError",
    "DuplicateTask",
    "EnqueueSpec",
    "LeaseLost",
    "Order",
    "Permanent",
    "Pool",
    "PoolStats",
    "Reservation",
    "Retry",
    "ServiceFailed",
    "Stats",
    "Task",
    "TaskQueue",
    "TaskQueueError",
    "TaskState",
    "ValidationError",
    "WaitingGroup",
    "Worker",
    "WorkerInfo",
    "network_pool",
]
__version__ = "0.1.0"


__getattr__, __dir__ = lazy_exports(__name__, _LAZY)
