"""The store layer of the worker registry: runs the statements of ``sql/registry.sql``.

Kept apart from :mod:`taskqueue.store` because it is a separate concern (who
is working, and what they hold back for), with its own table life cycle.
Like the store, it never commits: callers own the transaction.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sqlalchemy.engine import Connection, Row

from .store import Q
from .task import Reservation, WorkerInfo


@dataclass(frozen=True, slots=True)
class WaitingHead:
    """A claimable task at the head of the queue, as a scheduling policy needs it."""

    id: int
    queue: str
    priority: int
    required: int
    estimate: float | None  # given at enqueue
    learnt: float | None  # its queue's learnt run time
    reserved_by: str | None  # the live worker holding capacity back for it, if any


class RegistryStore:
    """Typed access to the registry statements."""

    def register(
        self,
        conn: Connection,
        *,
        name: str,
        host: str,
        pid: int,
        queues: Sequence[str] | None,
        capacity: int | None,
        in_use: int,
        running: int,
        policy: str,
        ttl: float,
    ) -> None:
        conn.execute(
            Q["register_worker"],
            {
                "name": name,
                "host": host,
                "pid": pid,
                "queues": None if queues is None else list(queues),
                "capacity": capacity,
                "in_use": in_use,
                "running": running,
                "policy": policy,
                "ttl": ttl,
            },
        )

    def unregister(self, conn: Connection, name: str) -> None:
        conn.execute(Q["unregister_worker"], {"name": name})

    def workers(self, conn: Connection, *, include_dead: bool = False) -> list[WorkerInfo]:
        return [_worker(r) for r in conn.execute(Q["list_workers"], {"include_dead": include_dead})]

    def delete_dead(self, conn: Connection, keep: float) -> list[str]:
        return [r.name for r in conn.execute(Q["delete_dead_workers"], {"keep": keep})]

    def reserve(
        self, conn: Connection, *, worker: str, task_id: int, required: int, queue: str, start_in: float
    ) -> bool:
        """Record the worker's one reservation; False if the worker is not live in the registry."""
        row = conn.execute(
            Q["set_reservation"],
            {"worker": worker, "task_id": task_id, "required": required, "queue": queue, "start_in": start_in},
        ).first()
        return row is not None

    def clear_reservation(self, conn: Connection, worker: str) -> None:
        conn.execute(Q["clear_reservation"], {"worker": worker})

    def waiting_heads(
        self, conn: Connection, *, queues: Sequence[str] | None, limit: int, descending: bool
    ) -> list[WaitingHead]:
        rows = conn.execute(
            Q["waiting_heads"],
            {"queues": None if queues is None else list(queues), "limit": limit, "descending": descending},
        )
        return [WaitingHead(r.id, r.queue, r.priority, r.required, r.estimate, r.learnt, r.reserved_by) for r in rows]

    def learnt_estimates(self, conn: Connection, queues: Sequence[str] | None) -> dict[str, float]:
        """Each queue's learnt run time in seconds (queues with no finished task are absent)."""
        rows = conn.execute(Q["queue_estimates"], {"queues": None if queues is None else list(queues)})
        return {r.queue: float(r.seconds) for r in rows}

    def reservations(self, conn: Connection) -> list[Reservation]:
        """Live workers' reservations, oldest first (the first holder of a task owns it)."""
        return [
            Reservation(r.worker, r.task_id, r.required, r.queue, r.since, r.start_by)
            for r in conn.execute(Q["list_reservations"])
        ]


def _worker(r: Row) -> WorkerInfo:
    reservation = None
    if r.reserved_task_id is not None:
        reservation = Reservation(
            r.name, r.reserved_task_id, r.reserved_required, r.reserved_queue, r.reserved_since, r.reserved_start_by
        )
    return WorkerInfo(
        name=r.name,
        host=r.host,
        pid=r.pid,
        queues=None if r.queues is None else tuple(r.queues),
        capacity=r.capacity,
        in_use=r.in_use,
        running=r.running,
        policy=r.policy,
        started_at=r.started_at,
        last_seen_at=r.last_seen_at,
        expires_at=r.expires_at,
        alive=r.alive,
        reservation=reservation,
    )
