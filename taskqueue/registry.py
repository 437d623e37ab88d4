"""The worker registry: each live worker's row, kept by its heartbeat, and its reservation.

Workers see each other through it, so that a fleet schedules fairly: a worker
that holds capacity back for a waiting task records it, and the others then
hold back for other tasks (or none) instead of all for the same one.

Liveness: a row lives until ``expires_at`` (now() + ``ttl`` at each beat, the
ttl being the worker's lease). Every read ignores an expired row at once, and
with it the worker's reservation; the maintenance leader deletes rows that have
been dead for ``DEAD_KEEP_SECONDS``, so operators can still see what died.
"""

from __future__ import annotations

import logging
import os
import socket
from collections.abc import Sequence
from typing import TYPE_CHECKING

from .errors import ValidationError
from .scheduling import POLICIES
from .spec import check_name
from .store import registry as ops
from .store.registry import WaitingHead
from .task import Reservation, WorkerInfo

if TYPE_CHECKING:
    from .queue import TaskQueue

log = logging.getLogger("taskqueue.worker.registry")

DEAD_KEEP_SECONDS = 3600.0


class Registry:
    """One worker's view of the registry, on a TaskQueue's connection pool."""

    def __init__(
        self,
        tq: TaskQueue,
        *,
        name: str,
        queues: Sequence[str] | None,
        capacity: int | None,
        policy: str,
        ttl: float,
    ) -> None:
        if policy not in POLICIES:
            raise ValidationError("policy", f"must be one of {', '.join(POLICIES)}, got {policy!r}")
        self.tq = tq
        self.name = check_name(name, "name")
        self.queues = None if queues is None else sorted(set(queues))
        self.capacity = capacity
        self.policy = policy
        self.ttl = ttl
        self.host = socket.gethostname()
        self.pid = os.getpid()

    def beat(self, *, in_use: int, running: int) -> None:
        """Register or refresh this worker's row (one autocommit statement)."""
        op = ops.register(
            name=self.name, host=self.host, pid=self.pid, queues=self.queues, capacity=self.capacity,
            in_use=in_use, running=running, policy=self.policy, ttl=self.ttl,
        )
        self.tq.db.run(op, mode="autocommit")

    def leave(self) -> None:
        """A clean shutdown: the row and its reservation go now, not at expiry."""
        self.tq.db.run(ops.unregister(self.name), mode="autocommit")

    def leave_or_expire(self) -> None:
        """``leave`` at shutdown; if the database is unreachable the row simply expires (logged)."""
        try:
            self.leave()
        except Exception as exc:
            log.warning("could not leave the registry (%s); the row expires on its own", exc,
                        extra={"worker": self.name})

    def reserve(self, *, task_id: int, required: int, queue: str, start_in: float) -> bool:
        """Record that this worker holds capacity back for ``task_id``; False if its row has expired."""
        op = ops.reserve(worker=self.name, task_id=task_id, required=required, queue=queue, start_in=max(0.0, start_in))
        return self.tq.db.run(op, mode="autocommit")

    def clear(self) -> None:
        self.tq.db.run(ops.clear_reservation(self.name), mode="autocommit")

    def reservations(self) -> list[Reservation]:
        return self.tq.db.run(ops.reservations(), mode="autocommit")

    def waiting_heads(self, *, queues: Sequence[str] | None, limit: int, descending: bool) -> list[WaitingHead]:
        """The head of the queue in claim order, with reservations and learnt run times (read-only)."""
        return self.tq.db.run(ops.waiting_heads(queues=queues, limit=limit, descending=descending), mode="autocommit")


def delete_dead_workers(tq: TaskQueue, keep: float = DEAD_KEEP_SECONDS) -> list[str]:
    """Maintenance: delete rows dead for longer than ``keep`` seconds (reservations go with them)."""
    return tq.db.run(ops.delete_dead(keep), mode="autocommit")


__all__ = ["DEAD_KEEP_SECONDS", "Registry", "WaitingHead", "WorkerInfo", "delete_dead_workers"]
