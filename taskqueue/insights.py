"""Read-only views of a queue for the dashboard and the metrics: the store layer of ``sql/dashboard.sql``.

Like :class:`taskqueue.store.Store`, it runs named statements on a connection
the caller opened, and nothing else runs them. It never writes: the
dashboard's actions go through :class:`taskqueue.TaskQueue`.
"""

from __future__ import annotations

import datetime as dt
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from .sql import load_queries

if TYPE_CHECKING:
    from .queue import TaskQueue

Q = {name: sa.text(sql) for name, sql in load_queries("dashboard.sql").items()}

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


class Insights:
    """Typed access to the read-only statements of ``sql/dashboard.sql``."""

    def summary(self, conn: Connection) -> Summary:
        started = time.perf_counter()
        now = conn.execute(Q["snapshot_time"]).scalar_one()
        groups = [Group(r.queue, r.state, r.priority, r.pool, r.n) for r in conn.execute(Q["live_counts"])]
        oldest = {r.queue: r.oldest_run_at for r in conn.execute(Q["oldest_waiting"])}
        per_minute = [0] * 60
        for r in conn.execute(Q["finished_per_minute"]):
            if 0 <= r.minute_ago < 60:
                per_minute[r.minute_ago] += r.n
        pools = [(r.name, r.running_limit, r.running) for r in conn.execute(Q["pool_rows"])]
        # Lease holders not in the worker registry (claims made through the
        # API by a program of the user's own): what they hold, capacity unknown.
        holders = [WorkerLoad(r["worker"], None, r["required"], r["tasks"]) for r in self.running_by_worker(conn)]
        return Summary(now, groups, oldest, per_minute, pools, holders, time.perf_counter() - started)

    def pool_waiting(self, conn: Connection) -> dict[str, int]:
        return {r.pool: r.n for r in conn.execute(Q["pool_waiting"])}

    def browse(self, conn: Connection, *, filters: dict[str, Any], before_id: int | None, limit: int,
               timeout_ms: int) -> list[dict[str, Any]]:
        conn.execute(Q["limit_browse_time"], {"timeout": f"{int(timeout_ms)}ms"})
        params = {**filters, "before_id": before_id, "limit": limit}
        return [dict(r) for r in conn.execute(Q["browse_tasks"], params).mappings()]

    def failure_groups(self, conn: Connection, limit: int) -> list[dict[str, Any]]:
        return [dict(r) for r in conn.execute(Q["failure_groups"], {"limit": limit}).mappings()]

    def failure_members(self, conn: Connection, *, kind: str, fingerprint: str, before_id: int | None,
                        limit: int) -> list[dict[str, Any]]:
        params = {"kind": kind, "fingerprint": fingerprint, "before_id": before_id, "limit": limit}
        return [dict(r) for r in conn.execute(Q["failure_group_members"], params).mappings()]

    def running_by_worker(self, conn: Connection) -> list[dict[str, Any]]:
        return [dict(r) for r in conn.execute(Q["running_by_worker"]).mappings()]



def read_summary(tq: TaskQueue) -> Summary:
    """The summary, with the live workers of the registry (TaskQueue.workers) in place of bare lease holders."""
    with tq.engine.begin() as conn:
        summary = Insights().summary(conn)
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
