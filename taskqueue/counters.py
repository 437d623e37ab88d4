"""Event counts of one ``TaskQueue`` handle: claims, completions, failures, retries, rescues, lost leases.

Kept in the process (a few integer additions under a lock) rather than in the
database: a counter row updated by every claim would serialise the claims,
and the tasks table cannot give monotonic counts once finished rows are
pruned. Each worker process exposes its own counts (``taskqueue worker
--metrics-port``) and Prometheus sums them over processes; see
:mod:`taskqueue.metrics`. This module has no dependencies, so counting costs
nothing for users who never install the ``dashboard`` extra.
"""

from __future__ import annotations

import datetime as dt
import math
import threading
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .task import Task

#: Upper bounds (seconds) of the claim-latency histogram's buckets: from a
#: claim that was waiting on a listening worker to a backlog of hours.
LATENCY_BUCKETS: tuple[float, ...] = (
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0, 1800.0, 3600.0, math.inf,
)

#: The events counted per queue, and the ones counted per process only.
QUEUE_EVENTS = ("claims", "completions", "failures", "retries")
PROCESS_EVENTS = ("rescues", "lost_leases", "lock_retries")


@dataclass
class Histogram:
    """Cumulative-ready bucket counts (not cumulative: bucket i counts values in (b[i-1], b[i]])."""

    buckets: list[int] = field(default_factory=lambda: [0] * len(LATENCY_BUCKETS))
    total: float = 0.0
    count: int = 0

    def observe(self, value: float) -> None:
        for i, bound in enumerate(LATENCY_BUCKETS):
            if value <= bound:
                self.buckets[i] += 1
                break
        self.total += value
        self.count += 1

    def copy(self) -> Histogram:
        return Histogram(list(self.buckets), self.total, self.count)


@dataclass
class Snapshot:
    """A consistent copy of the counts, taken under the lock."""

    by_queue: dict[tuple[str, str, str], int]
    by_process: dict[str, int]
    latency: dict[str, Histogram]


class Counters:
    """Thread-safe event counts; the TaskQueue methods add to them after each commit."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        # (event, queue, kind) -> count; kind is "" except for retries (backoff or operator).
        self._by_queue: dict[tuple[str, str, str], int] = {}
        self._by_process: dict[str, int] = {event: 0 for event in PROCESS_EVENTS}
        self._latency: dict[str, Histogram] = {}

    def add(self, event: str, queue: str, n: int = 1, kind: str = "") -> None:
        if event not in QUEUE_EVENTS:
            raise ValueError(f"unknown per-queue event {event!r}")
        if n <= 0:
            return
        key = (event, queue, kind)
        with self._lock:
            self._by_queue[key] = self._by_queue.get(key, 0) + n

    def add_process(self, event: str, n: int = 1) -> None:
        if event not in PROCESS_EVENTS:
            raise ValueError(f"unknown per-process event {event!r}")
        if n <= 0:
            return
        with self._lock:
            self._by_process[event] += n

    def claimed(self, tasks: Iterable[Task]) -> None:
        """Count claims and their latency: run_at (due) to started_at (claimed), both database times."""
        with self._lock:
            for task in tasks:
                queue = task.queue
                key = ("claims", queue, "")
                self._by_queue[key] = self._by_queue.get(key, 0) + 1
                run_at: dt.datetime | None = task.run_at
                started: dt.datetime | None = task.started_at
                if run_at is not None and started is not None:
                    waited = max(0.0, (started - run_at).total_seconds())
                    self._latency.setdefault(queue, Histogram()).observe(waited)

    def snapshot(self) -> Snapshot:
        with self._lock:
            return Snapshot(
                dict(self._by_queue),
                dict(self._by_process),
                {queue: h.copy() for queue, h in self._latency.items()},
            )
