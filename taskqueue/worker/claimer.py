"""The claim loop: fill the free budgets in one round trip, then sleep until something could change.

It sleeps on one event. Anything that could make a claim succeed sets it: a
NOTIFY (enqueue, a freed pool slot, a rescue), a local outcome recorded, a
lost lease, a stop request. Otherwise it sleeps exactly until the earliest
scheduled run_at, or ``poll_interval`` as a fallback.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from ..queue import TaskQueue
from ..scheduling.planner import Planner
from ..task import Task
from .capacity import Capacity
from .service import Service, WorkerSignals

log = logging.getLogger("taskqueue.worker.claimer")

RUN_AT_SLACK = 0.005  # wake just after run_at, not just before
ERROR_BACKOFF_MAX = 5.0


class Claimer(Service):
    """Claims what fits the free budgets and hands the tasks to ``submit``."""

    def __init__(
        self,
        tq: TaskQueue,
        capacity: Capacity,
        *,
        queues: list[str],
        worker: str,
        lease: float,
        poll_interval: float,
        wake: threading.Event,
        submit: Callable[[Task], None],
        listening: threading.Event,
        ready: threading.Event,
        halt: threading.Event,
        signals: WorkerSignals | None = None,
        planner: Planner | None = None,
    ) -> None:
        super().__init__("claimer", worker=worker, signals=signals)
        self.tq = tq
        self.planner = planner  # None: greedy (fill the free capacity)
        self.capacity = capacity
        self.queues = queues
        self.lease = lease
        self.poll_interval = poll_interval
        self.wake = wake
        self.submit = submit
        self.listening = listening
        self.ready = ready
        self.halt = halt  # the worker's stop request: no claim after it, not even a first one

    def claim(self) -> tuple[list[Task], int]:
        """Claim what fits now; return (tasks, how many were asked for: 0 when no thread is free)."""
        available, threads = self.capacity.free()
        if threads <= 0:
            return [], 0
        if self.planner is not None and available is not None:
            # The policy only ever lowers the budget: the claim stays the exact-fit claim.
            available = self.planner.budget(self.capacity.running, available)
        tasks = self.tq.claim_many(
            available=available, limit=threads, queues=self.queues, worker=self.worker, lease=self.lease
        )
        now = time.monotonic()
        for task in tasks:
            self.capacity.add(task, now)
        return tasks, threads

    def interrupt(self) -> None:
        self.wake.set()

    def run(self) -> None:
        errors = 0
        while not self.stopping and not self.halt.is_set():
            # Clear before looking: a wake-up that arrives during the claim is kept.
            self.wake.clear()
            try:
                tasks, asked = self.claim()
                errors = 0
                for task in tasks:
                    self.submit(task)
                if not self.ready.is_set() and self.listening.is_set():
                    self.ready.set()
                self.signals.claimed.signal(tasks)
                if asked and len(tasks) == asked:
                    continue  # a full batch: there may be more right away
                timeout = self.poll_interval
                if asked:
                    next_run = self.tq.next_run_in()
                    if next_run is not None:
                        timeout = min(timeout, max(0.0, next_run) + RUN_AT_SLACK)
            except Exception as exc:
                errors += 1
                timeout = min(ERROR_BACKOFF_MAX, 0.1 * 2**errors, self.poll_interval)
                log.warning("claim round failed (%s); retrying in %.1f s", exc, timeout,
                            extra={"worker": self.worker})
            if self.stopping or self.halt.is_set():
                return
            self.wake.wait(timeout)
