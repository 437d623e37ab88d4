"""What the dashboard and the metrics know of a queue: the summary, its derived views, and its cache.

The statements are read by :mod:`taskqueue.store.insights` (``sql/dashboard.sql``);
this module holds the value objects they become and what is computed from
them. It never writes: the dashboard's actions go through ``TaskQueue``.
"""

from __future__ import annotations

import datetime as dt
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .queue import TaskQueue

#: Priority bands for the metrics' labels: a label per priority would let a
#: caller's priorities (any 32-bit integer) blow up the series count.
BANDS: tuple[tuple[str, int | None, int | None], ...] = (
    ("<0", None, -1),
    ("0", 0, 0),
    ("1-9", 1, 9),
    ("10-99", 10, 99),
    (">=100", 100, None),
)


def priority_band(priority: int) -> str:
    for name, low, high in BANDS:
        if (low is None or priority >= low) and (high is None or priority <= high):
            return name
    raise AssertionError(priority)  # pragma: no cover - the bands cover every integer


@dataclass(frozen=True, slots=True)
class Group:
    """Live tasks (or failed ones) sharing queue, state and priority; parked ones also share a pool."""

    queue: str
    state: str
    priority: int
    pool: str | None  # set for parked tasks only
    count: int

    @property
    def parked(self) -> bool:
        return self.pool is not None


@dataclass(frozen=True, slots=True)
class WorkerLoad:
    """A worker's capacity (None: unlimited or unknown) and the resources its running tasks take."""

    name: str
    capacity: int | None
    in_use: int
    tasks: int


@dataclass
class Summary:
    """Everything the overview page and the metrics read, from one snapshot."""

    now: dt.datetime
    groups: list[Group]
    oldest_run_at: dict[str, dt.datetime]  # per queue, see oldest_waiting in sql/dashboard.sql
    finished_per_minute: list[int]  # index 0 = the current minute, 59 = an hour ago
    pools: list[tuple[str, int | None, int]]  # (name, limit, running)
    workers: list[WorkerLoad]
    seconds: float  # what reading it took
    depth: dict[str, dict[str, int]] = field(default_factory=dict)  # queue -> state -> count

    def __post_init__(self) -> None:
        for g in self.groups:
            states = self.depth.setdefault(g.queue, {"queued": 0, "scheduled": 0, "running": 0, "failed": 0})
            states[g.state] += g.count

    def waiting_by_priority(self) -> list[tuple[str, int, int]]:
        """(queue, priority, waiting) for the queued tasks, parked ones included."""
        acc: dict[tuple[str, int], int] = {}
        for g in self.groups:
            if g.state == "queued":
                acc[(g.queue, g.priority)] = acc.get((g.queue, g.priority), 0) + g.count
        return [(q, p, n) for (q, p), n in sorted(acc.items())]

    def oldest_waiting_seconds(self) -> dict[str, float]:
        """Per queue: how long its longest-waiting queued task has been due (0 if none waits)."""
        ages: dict[str, float] = {queue: 0.0 for queue in self.depth}
        for queue, run_at in self.oldest_run_at.items():
            ages[queue] = max(0.0, (self.now - run_at).total_seconds())
        return ages

    def pool_use(self, waiting: dict[str, int] | None = None) -> list[dict[str, Any]]:
        """Per pool: limit, running, parked, and waiting when given (see Insights.pool_waiting)."""
        parked: dict[str, int] = {}
        for g in self.groups:
            if g.parked and g.pool is not None:
                parked[g.pool] = parked.get(g.pool, 0) + g.count
        return [
            {"name": name, "limit": limit, "running": running, "parked": parked.get(name, 0),
             "waiting": None if waiting is None else waiting.get(name, 0)}
            for name, limit, running in self.pools
        ]


def read_summary(tq: TaskQueue) -> Summary:
    """The summary, with the live workers of the registry (TaskQueue.workers) in place of bare lease holders."""
    from .store import insights as insight_ops  # here: the store's operations build this module's types

    summary = tq.db.run(insight_ops.summary(), mode="snapshot")
    registered = [WorkerLoad(w.name, w.capacity, w.in_use, w.running) for w in tq.workers()]
    names = {w.name for w in registered}
    summary.workers = registered + [w for w in summary.workers if w.name not in names]
    return summary


class CachedSummary:
    """The summary read at most once per ``ttl`` seconds, however many pages and scrapes ask.

    Concurrent callers of a stale summary wait for the one reading it rather
    than each running the statements: the cost per interval stays one read.
    """

    def __init__(self, read: Callable[[], Summary], ttl: float = 5.0) -> None:
        self._read = read
        self.ttl = ttl
        self._lock = threading.Lock()
        self._value: Summary | None = None
        self._at = 0.0

    def get(self) -> Summary:
        with self._lock:
            if self._value is None or time.monotonic() - self._at >= self.ttl:
                self._value = self._read()
                self._at = time.monotonic()
            return self._value

    def invalidate(self) -> None:
        with self._lock:
            self._value = None
