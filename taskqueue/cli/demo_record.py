"""What the demo records while it runs, and how it judges the rules afterwards.

Handlers note their start and end in a :class:`Recorder`; :func:`summarize`
compares those records and the database's timestamps with the rules the demo
claims (pool limits, worker capacities, exactly once, priority order).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import statistics
import threading
import time
from collections import defaultdict
from collections.abc import Sequence

from rich.table import Table

from ..task import Task
from .common import out

#: Clock slack when judging claim order from database timestamps: two claims
#: this close together may have raced on row locks, which is not an inversion.
ORDER_SLACK = 0.25
#: Concurrent claims skip each other's locked rows (SKIP LOCKED), so when two
#: workers claim at once one may pass over an urgent row the other locked and
#: then could not take (its pool had just filled). Priority order is exact
#: per claim, not across racing claims; this share of such races is tolerated.
INVERSION_SHARE = 0.03


@dataclasses.dataclass
class Run:
    """What one handler call saw."""

    task_id: int
    worker: str
    priority: int
    required: int
    pool: str
    start: float
    end: float | None = None


class Recorder:
    """The handlers' own log: start/end of every call, and the running peaks."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.runs: list[Run] = []
        self.in_use: dict[str, int] = defaultdict(int)
        self.peak_in_use: dict[str, int] = defaultdict(int)
        self.pool_running: dict[str, int] = defaultdict(int)
        self.peak_pool: dict[str, int] = defaultdict(int)
        self.done_by_worker: dict[str, int] = defaultdict(int)
        self.finished = 0
        self.all_done = threading.Event()
        self.expected = 0

    def start(self, worker: str, task: Task) -> Run:
        run = Run(task.id, worker, task.priority, task.required, task.pool or "-", time.monotonic())
        with self.lock:
            self.runs.append(run)
            self.in_use[worker] += task.required
            self.peak_in_use[worker] = max(self.peak_in_use[worker], self.in_use[worker])
            self.pool_running[run.pool] += 1
            self.peak_pool[run.pool] = max(self.peak_pool[run.pool], self.pool_running[run.pool])
        return run

    def end(self, run: Run) -> None:
        with self.lock:
            run.end = time.monotonic()
            self.in_use[run.worker] -= run.required
            self.pool_running[run.pool] -= 1
            self.done_by_worker[run.worker] += 1
            self.finished += 1
            if self.finished >= self.expected:
                self.all_done.set()



def percentile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return 0.0
    index = min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))
    return ordered[index]


@dataclasses.dataclass
class Verdict:
    rule: str
    held: bool
    detail: str


def order_inversions(tasks: list[Task], limits: dict[str, int]) -> list[tuple[Task, Task]]:
    """Pairs (claimed, skipped): a less urgent task claimed while a more urgent one that fitted kept waiting.

    "Fitted" means: no larger than the claimed task (so it fitted the worker's
    free capacity) and its pool had room, or was the claimed task's pool.
    Judged from the database's started_at/finished_at, with ORDER_SLACK.
    """
    started = [t for t in tasks if t.started_at is not None]
    t0 = min((t.created_at for t in tasks), default=None)
    if t0 is None:
        return []

    def seconds(value: dt.datetime) -> float:
        return (value - t0).total_seconds()

    start = {t.id: seconds(t.started_at) for t in started if t.started_at is not None}
    finish = {t.id: seconds(t.finished_at) if t.finished_at else float("inf") for t in started}
    created = {t.id: seconds(t.created_at) for t in tasks}
    by_pool: dict[str, list[Task]] = defaultdict(list)
    for t in started:
        by_pool[t.pool or "-"].append(t)

    def pool_had_room(pool: str, at: float) -> bool:
        limit = limits.get(pool)
        if limit is None:
            return True
        busy = sum(
            1 for t in by_pool[pool] if start[t.id] <= at + ORDER_SLACK and finish[t.id] >= at - ORDER_SLACK
        )
        return busy < limit

    found = []
    for low in started:
        s_low = start[low.id]
        for high in started:
            if high.priority >= low.priority or high.required > low.required:
                continue
            if created[high.id] > s_low or start[high.id] <= s_low + ORDER_SLACK:
                continue
            if high.pool == low.pool or pool_had_room(high.pool or "-", s_low):
                found.append((low, high))
                break
    return found


def summarize(
    tasks: list[Task],
    recorder: Recorder,
    limits: dict[str, int],
    db_peak: dict[str, int],
    workers: Sequence[tuple[str, int]],
) -> list[Verdict]:
    verdicts: list[Verdict] = []
    table = Table(title="pools: peak running vs limit", title_justify="left")
    for column in ("pool", "limit", "peak (handlers)", "peak (database)", "tasks"):
        table.add_column(column, justify="left" if column == "pool" else "right")
    per_pool: dict[str, int] = defaultdict(int)
    for t in tasks:
        per_pool[t.pool or "-"] += 1
    pools_ok = True
    for name, limit in limits.items():
        peak = recorder.peak_pool.get(name, 0)
        seen = db_peak.get(name, 0)
        ok = peak <= limit and seen <= limit
        pools_ok &= ok
        style = None if ok else "bold red"
        table.add_row(name, str(limit), str(peak), str(seen), str(per_pool[name]), style=style)
    out.print(table)
    verdicts.append(Verdict("no pool over its limit", pools_ok, "peak running per pool <= its limit"))

    table = Table(title="workers: peak in use vs capacity", title_justify="left")
    for column in ("worker", "capacity", "peak in use", "tasks run"):
        table.add_column(column, justify="left" if column == "worker" else "right")
    workers_ok = True
    for name, capacity in workers:
        peak = recorder.peak_in_use.get(name, 0)
        ok = peak <= capacity
        workers_ok &= ok
        table.add_row(name, str(capacity), str(peak), str(recorder.done_by_worker.get(name, 0)),
                      style=None if ok else "bold red")
    out.print(table)
    verdicts.append(Verdict("no worker over its capacity", workers_ok, "peak sum of sizes <= capacity"))

    runs_per_task: dict[int, int] = defaultdict(int)
    for run in recorder.runs:
        runs_per_task[run.task_id] += 1
    not_done = [t.id for t in tasks if t.state != "done"]
    twice = [i for i, n in runs_per_task.items() if n != 1]
    never = [t.id for t in tasks if runs_per_task.get(t.id, 0) == 0]
    once_ok = not not_done and not twice and not never
    verdicts.append(
        Verdict(
            "every task ran exactly once",
            once_ok,
            f"{len(tasks)} tasks, {len(not_done)} not done, {len(twice)} run more than once, {len(never)} never run",
        )
    )

    started = sorted((t for t in tasks if t.started_at is not None), key=lambda t: (t.started_at, t.id))
    rank = {t.id: i + 1 for i, t in enumerate(started)}
    table = Table(title="claim order and wait by priority (0 = most urgent)", title_justify="left")
    for column in ("priority", "tasks", "mean claim rank", "mean wait", "p95 wait"):
        table.add_column(column, justify="right")
    by_priority: dict[int, list[Task]] = defaultdict(list)
    for t in started:
        by_priority[t.priority].append(t)
    for priority in sorted(by_priority):
        group = by_priority[priority]
        waits = [(t.started_at - t.created_at).total_seconds() for t in group if t.started_at is not None]
        table.add_row(
            str(priority),
            str(len(group)),
            f"{statistics.fmean(rank[t.id] for t in group):.0f}",
            f"{statistics.fmean(waits):.2f} s",
            f"{percentile(waits, 0.95):.2f} s",
        )
    out.print(table)
    inversions = order_inversions(tasks, limits)
    allowed = max(2, int(len(tasks) * INVERSION_SHARE))
    detail = "no less urgent task started while a more urgent one that fitted waited"
    if inversions:
        low, high = inversions[0]
        detail = (
            f"{len(inversions)} inversion(s), at most {allowed} allowed for claims racing on row locks;"
            f" e.g. task {low.id} (priority {low.priority}, size {low.required}) started"
            f" before task {high.id} (priority {high.priority}, size {high.required})"
        )
    verdicts.append(Verdict("claims follow priority among tasks that fit", len(inversions) <= allowed, detail))
    return verdicts


