"""Deletes finished tasks older than the retention, so the hot table stays small."""

from __future__ import annotations

import logging
from collections.abc import Callable

from ..queue import TaskQueue

log = logging.getLogger("taskqueue.worker.maintenance")

BATCH = 10_000
MAX_BATCHES = 100  # per round: bounded work, the next round goes on


class Pruner:
    def __init__(self, tq: TaskQueue, *, retention: float, worker: str) -> None:
        self.tq = tq
        self.retention = retention
        self.worker = worker

    def run_once(self, still_leader: Callable[[], bool] | None = None) -> int:
        """Prune in batches; ``still_leader`` is asked between batches (and keeps the leader's session busy)."""
        total = 0
        for i in range(MAX_BATCHES):
            if i and still_leader is not None and not still_leader():
                break
            deleted = self.tq.prune(older_than=self.retention, batch=BATCH)
            total += deleted
            if deleted < BATCH:
                break
        if total:
            log.info(
                "pruned %d finished tasks older than %g s",
                total,
                self.retention,
                extra={"worker": self.worker, "outcome": "pruned", "count": total},
            )
        return total
