"""Gives expired leases back to the queue, so a dead worker's tasks run again."""

from __future__ import annotations

import logging

from ..queue import TaskQueue

log = logging.getLogger("taskqueue.worker.maintenance")


class Rescuer:
    def __init__(self, tq: TaskQueue, *, worker: str) -> None:
        self.tq = tq
        self.worker = worker

    def run_once(self) -> int:
        rescued = self.tq.rescue_expired()
        if rescued:
            log.info(
                "rescued %d tasks with expired leases",
                rescued,
                extra={"worker": self.worker, "outcome": "rescued", "count": rescued},
            )
        return rescued
