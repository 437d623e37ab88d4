"""The worker registry and reservations, as sans-IO operations (statements: ``registry.sql``).

A worker's row lives until its ``expires_at``; every read here ignores an
expired row, and with it the worker's reservation. Rows become
:class:`~taskqueue.task.WorkerInfo` and :class:`~taskqueue.task.Reservation` here.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..task import Reservation, WorkerInfo
from .requests import Op, Row, execute, first, rows


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


def register(
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
) -> Op[None]:
    """Register or refresh a worker's row: its heartbeat."""
    yield from execute(
        "register_worker",
        name=name,
        host=host,
        pid=pid,
        queues=None if queues is None else list(queues),
        capacity=capacity,
        in_use=in_use,
        running=running,
        policy=policy,
        ttl=ttl,
    )


def unregister(name: str) -> Op[None]:
    yield from execute("unregister_worker", name=name)


def workers(*, include_dead: bool = False) -> Op[list[WorkerInfo]]:
    found = yield from rows("list_workers", include_dead=include_dead)
    return [_worker(r) for r in found]


def delete_dead(keep: float) -> Op[list[str]]:
    found = yield from rows("delete_dead_workers", keep=keep)
    return [r["name"] for r in found]


def reserve(*, worker: str, task_id: int, required: int, queue: str, start_in: float) -> Op[bool]:
    """Record the worker's one reservation; False if the worker is not live in the registry."""
    row = yield from first(
        "set_reservation", worker=worker, task_id=task_id, required=required, queue=queue, start_in=start_in
    )
    return row is not None


def clear_reservation(worker: str) -> Op[None]:
    yield from execute("clear_reservation", worker=worker)


def reservations() -> Op[list[Reservation]]:
    """Live workers' reservations, oldest first (the first holder of a task owns it)."""
    found = yield from rows("list_reservations")
    return [
        Reservation(r["worker"], r["task_id"], r["required"], r["queue"], r["since"], r["start_by"]) for r in found
    ]


def waiting_heads(*, queues: Sequence[str] | None, limit: int, descending: bool) -> Op[list[WaitingHead]]:
    found = yield from rows(
        "waiting_heads", queues=None if queues is None else list(queues), limit=limit, descending=descending
    )
    return [
        WaitingHead(r["id"], r["queue"], r["priority"], r["required"], r["estimate"], r["learnt"], r["reserved_by"])
        for r in found
    ]


def learnt_estimates(queues: Sequence[str] | None) -> Op[dict[str, float]]:
    """Each queue's learnt run time in seconds (queues with no finished task are absent)."""
    found = yield from rows("queue_estimates", queues=None if queues is None else list(queues))
    return {r["queue"]: float(r["seconds"]) for r in found}


def _worker(r: Row) -> WorkerInfo:
    reservation = None
    if r["reserved_task_id"] is not None:
        reservation = Reservation(
            r["name"], r["reserved_task_id"], r["reserved_required"], r["reserved_queue"],
            r["reserved_since"], r["reserved_start_by"],
        )
    return WorkerInfo(
        name=r["name"],
        host=r["host"],
        pid=r["pid"],
        queues=None if r["queues"] is None else tuple(r["queues"]),
        capacity=r["capacity"],
        in_use=r["in_use"],
        running=r["running"],
        policy=r["policy"],
        started_at=r["started_at"],
        last_seen_at=r["last_seen_at"],
        expires_at=r["expires_at"],
        alive=r["alive"],
        reservation=reservation,
    )
