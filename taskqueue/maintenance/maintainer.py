"""The maintenance loop every worker runs; only the elected leader does the work.

Each round, a worker that is not the leader tries to become it; the leader
rescues expired leases every round and prunes old finished tasks now and then.
Rounds are a few seconds apart, so a killed worker's task is back in the queue
within its lease plus one round.
"""

from __future__ import annotations

import logging
import time

from ..queue import TaskQueue
from ..worker.service import Service, WorkerSignals
from .leader import Leader
from .pruner import Pruner
from .rescuer import Rescuer

log = logging.getLogger("taskqueue.worker.maintenance")


class Maintainer(Service):
    def __init__(
        self,
        tq: TaskQueue,
        *,
        worker: str,
        retention: float,
        interval: float = 2.0,
        prune_interval: float = 300.0,
        signals: WorkerSignals | None = None,
    ) -> None:
        super().__init__("maintainer", worker=worker, signals=signals)
        # A frozen leader's session dies after a few missed rounds (see leader.py).
        self.leader = Leader(tq, worker=worker, idle_timeout=max(2.0, 4 * interval))
        self.rescuer = Rescuer(tq, worker=worker)
        self.pruner = Pruner(tq, retention=retention, worker=worker)
        self.interval = interval
        self.prune_interval = prune_interval
        self.rounds = 0  # rounds run as the leader
        self._next_prune = 0.0

    def stop(self, timeout: float | None = None) -> bool:
        ended = super().stop(timeout)
        self.leader.resign()
        return ended

    def run(self) -> None:
        while not self.stopping:
            self.signals.maintained.signal(self.round())
            self.wait(self.interval)

    def round(self) -> bool:
        """One round; True if this worker was the leader and did the work."""
        if not self.leader.ensure():
            return False
        try:
            self.rescuer.run_once()
            now = time.monotonic()
            if now >= self._next_prune:
                self._next_prune = now + self.prune_interval
                self.pruner.run_once(still_leader=self.leader.ensure)
        except Exception as exc:
            log.warning("maintenance round failed: %s", exc, extra={"worker": self.worker})
            return False
        self.rounds += 1
        return True
