"""Keeps the worker's leases alive with one batched heartbeat per beat.

A beat comes every third of the lease, so two beats can fail (a slow
database, a blip) before a lease runs out. A claim the database no longer
recognises is lost: it stops counting against capacity, and its handler's
outcome will be discarded, because another worker may already hold it.

A claim whose task got a cancel request, or whose lease was lost, is handed
to ``cancel``: an async handler's coroutine is cancelled then (a thread cannot
be; a sync handler sees ``task.cancel_requested`` and may return early).

The same beat refreshes the worker's registry row (its capacity in use), with
or without running tasks, so the fleet sees it alive.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from ..queue import TaskQueue
from ..registry import Registry
from ..task import Task
from .capacity import Capacity
from .service import Service, WorkerSignals

log = logging.getLogger("taskqueue.worker.heartbeat")


class Heartbeat(Service):
    join_timeout = 5.0

    def __init__(
        self,
        tq: TaskQueue,
        capacity: Capacity,
        *,
        lease: float,
        worker: str,
        registry: Registry | None = None,
        signals: WorkerSignals | None = None,
        cancel: Callable[[Task], None] | None = None,
    ) -> None:
        super().__init__("heartbeat", worker=worker, signals=signals)
        self.tq = tq
        self.registry = registry
        self.capacity = capacity
        self.cancel = cancel
        self.interval = max(0.05, lease / 3.0)

    def run(self) -> None:
        while not self.wait(self.interval):
            self.register()
            self.signals.beaten.signal(self.beat())

    def register(self) -> None:
        """Refresh the registry row; a failure is logged, and the next beat tries again."""
        if self.registry is None:
            return
        try:
            self.registry.beat(in_use=self.capacity.in_use, running=self.capacity.busy())
        except Exception as exc:
            log.warning("registry heartbeat failed: %s", exc, extra={"worker": self.worker})

    def beat(self) -> int:
        """Heartbeat every claim still running; return how many were lost."""
        tasks = self.capacity.holding()
        if not tasks:
            return 0
        try:
            lost = self.tq.heartbeat_many(tasks)
        except Exception as exc:
            log.warning("heartbeat of %d tasks failed: %s", len(tasks), exc, extra={"worker": self.worker})
            return 0
        count = 0
        for task in lost:
            if self.capacity.lose(task):
                count += 1
                log.warning(
                    "task %s (queue %s): lease lost; no longer counted, its outcome will be discarded",
                    task.id,
                    task.queue,
                    extra={"task_id": task.id, "queue": task.queue, "worker": self.worker, "outcome": "lease_lost"},
                )
        if self.cancel is not None:  # after lose(): a cancelled handler of a lost claim is discarded
            gone = {id(t) for t in lost}
            for task in tasks:
                if task.cancel_requested or id(task) in gone:
                    self.cancel(task)
        return count
