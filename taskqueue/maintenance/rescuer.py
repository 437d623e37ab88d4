"""Gives expired leases back to the queue, so a dead worker's tasks run again.

It also deletes the registry rows of workers long dead (reads ignore them
from the moment they expire; the row is kept a while for operators).
"""

from __future__ import annotations

import logging

from ..queue import TaskQueue
from ..registry import delete_dead_workers

log = logging.getLogger("taskqueue.worker.maintenance")


class Rescuer:
    def __init__(self, tq: TaskQueue, *, worker: str) -> None:
        self.tq = tq
        self.worker = worker

    def run_once(self) -> int:
        gone = delete_dead_workers(self.tq)
        if gone:
            log.info("deleted %d dead workers' registry rows", len(gone),
                     extra={"worker": self.worker, "count": len(gone)})
        rescued = self.tq.rescue_expired()
        if rescued:
            log.info(
                "rescued %d tasks with expired leases",
                rescued,
                extra={"worker": self.worker, "outcome": "rescued", "count": rescued},
            )
        return rescued
