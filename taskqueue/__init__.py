"""taskqueue: a durable task queue in PostgreSQL.

Priorities, resource-fit claims, concurrency pools, leases with fencing
tokens, retries and delays; every state change is one transaction.
"""

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
from .invariants import CheckReport
from .network import network_pool
from .queue import TaskQueue
from .stats import PoolStats, Stats, WaitingGroup
from .task import EnqueueSpec, Order, Pool, Reservation, Task, TaskState, WorkerInfo
from .worker import Worker

__all__ = [
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
