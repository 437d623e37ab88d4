"""taskqueue: a durable task queue in PostgreSQL.

Priorities, resource-fit claims, concurrency pools, leases with fencing
tokens, retries and delays; every state change is one transaction.
"""

from .errors import DuplicateTask, LeaseLost, Permanent, Retry, TaskQueueError, ValidationError
from .invariants import CheckReport
from .network import network_pool
from .queue import TaskQueue
from .task import Pool, Reservation, Task, WorkerInfo
from .worker import Worker

__all__ = [
    "CheckReport",
    "DuplicateTask",
    "LeaseLost",
    "Permanent",
    "Pool",
    "Reservation",
    "Retry",
    "Task",
    "TaskQueue",
    "TaskQueueError",
    "ValidationError",
    "Worker",
    "WorkerInfo",
    "network_pool",
]
__version__ = "0.1.0"
