"""``demo``: a live run of the whole idea, ending in a check that the rules held.

It works in its own schema (``taskqueue_demo``), so it never touches user
data, and empties that schema first. A mixed workload (priorities, sizes,
targets in several /24 networks whose pools have limits 1 to 3) is drained by
three in-process workers of different capacities. Every handler records its
start and end in memory; the summary compares those records and the
database's own timestamps with the rules:

- no pool ever ran more tasks than its limit;
- no worker ever held more than its capacity;
- every task ran exactly once;
- no task was claimed while a more urgent task that fitted the same slot
  (size and pool) kept waiting;
- and, for information, the claim rank and the wait per priority.
"""

from __future__ import annotations

import dataclasses
import logging
import random
import statistics
import threading
import time
from collections import defaultdict
from collections.abc import Sequence
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Group
from rich.live import Live
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from ..network import network_pool
from ..task import Task

if TYPE_CHECKING:  # imported in demo(): SQLAlchemy would slow every start of the command
    from ..queue import TaskQueue
from .common import RUN, DsnOption, err, out, settings

DEMO_SCHEMA = "taskqueue_demo"
QUEUE = "demo"
#: (network, pool limit): how many probes each /24 may see at once.
NETWORKS: tuple[tuple[str, int], ...] = (
    ("10.0.1.0", 1),
    ("10.0.2.0", 2),
    ("10.0.3.0", 3),
    ("192.168.7.0", 1),
    ("192.168.8.0", 2),
    ("172.16.4.0", 3),
)
#: (worker name, capacity)
WORKERS: tuple[tuple[str, int], ...] = (("small", 4), ("medium", 8), ("large", 12))
PRIORITY_WEIGHTS = (0.15, 0.25, 0.30, 0.30)  # priorities 0 (most urgent) to 3
SIZE_WEIGHTS = (0.22, 0.20, 0.16, 0.13, 0.10, 0.08, 0.06, 0.05)  # sizes 1 to 8
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


def make_workers(recorder: Recorder, work_scale: float) -> list[Any]:
    from ..worker import Worker

    workers = []
    for name, capacity in WORKERS:
        worker = Worker(queues=[QUEUE], capacity=capacity, lease=15.0, poll_interval=1.0, grace=5.0, name=name)

        def handle(task: Task, _name: str = name) -> dict[str, Any]:
            run = recorder.start(_name, task)
            try:
                time.sleep(float(task.payload["work_ms"]) * work_scale / 1000.0)
            finally:
                recorder.end(run)
            return {"probed": task.payload["target"], "by": _name}

        worker.handler(QUEUE, handle)
        workers.append(worker)
    return workers


def workload(count: int, seed: int) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    specs = []
    for i in range(count):
        network, _limit = rng.choice(NETWORKS)
        target = network.rsplit(".", 1)[0] + f".{rng.randint(1, 254)}"
        priority = rng.choices(range(4), PRIORITY_WEIGHTS)[0]
        size = rng.choices(range(1, 9), SIZE_WEIGHTS)[0]
        specs.append(
            {
                "payload": {"target": target, "work_ms": rng.randint(80, 300), "n": i},
                "queue": QUEUE,
                "priority": priority,
                "required": size,
                "pool": network_pool(target),
                "max_attempts": 1,
            }
        )
    return specs


def bar(value: int, limit: int, width: int = 12) -> str:
    filled = 0 if limit <= 0 else round(width * min(value, limit) / limit)
    return "█" * filled + "·" * (width - filled)


def live_view(progress: Progress, recorder: Recorder, pools: dict[str, int], db_running: dict[str, int]) -> Group:
    pool_table = Table(title="pools (one per /24)", title_justify="left")
    for column in ("pool", "running", "", "limit", "peak"):
        pool_table.add_column(column, justify="left" if column in ("pool", "") else "right")
    with recorder.lock:
        peak_pool = dict(recorder.peak_pool)
        in_use = dict(recorder.in_use)
        peak_use = dict(recorder.peak_in_use)
        done = dict(recorder.done_by_worker)
    for name, limit in pools.items():
        running = db_running.get(name, 0)
        pool_table.add_row(name, str(running), bar(running, limit, 6), str(limit), str(peak_pool.get(name, 0)))
    worker_table = Table(title="workers", title_justify="left")
    for column in ("worker", "in use", "", "capacity", "peak", "done"):
        worker_table.add_column(column, justify="left" if column in ("worker", "") else "right")
    for name, capacity in WORKERS:
        used = in_use.get(name, 0)
        worker_table.add_row(
            name, str(used), bar(used, capacity), str(capacity), str(peak_use.get(name, 0)), str(done.get(name, 0))
        )
    return Group(progress, pool_table, worker_table)


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
    #: What the "held" column says when the rule held; "within bound" where a tolerance was used.
    held_text: str = "yes"


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

    def seconds(value: Any) -> float:
        return (value - t0).total_seconds()

    start = {t.id: seconds(t.started_at) for t in started}
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


def summarize(tasks: list[Task], recorder: Recorder, limits: dict[str, int], db_peak: dict[str, int]) -> list[Verdict]:
    verdicts: list[Verdict] = []
    table = Table(title="pools: peak running vs limit", title_justify="left")
    for column in ("pool", "limit", "peak (handlers)", "peak (database)", "tasks"):
        table.add_column(column, justify="left" if column == "pool" else "right")
    per_pool = defaultdict(int)
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
    for name, capacity in WORKERS:
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
        waits = [(t.started_at - t.created_at).total_seconds() for t in group]
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
    held_text = "yes"
    if inversions:
        low, high = inversions[0]
        held_text = "within bound"
        detail = (
            f"{len(inversions)} of {len(tasks)} claims passed over a more urgent task; the bound for"
            f" claims racing on row locks is {allowed} ({INVERSION_SHARE:.0%}, see the README);"
            f" e.g. task {low.id} (priority {low.priority}, size {low.required}) started"
            f" before task {high.id} (priority {high.priority}, size {high.required})"
        )
    verdicts.append(
        Verdict("claims follow priority among tasks that fit", len(inversions) <= allowed, detail, held_text)
    )
    return verdicts


def demo(
    ctx: typer.Context,
    tasks: Annotated[int, typer.Option("--tasks", "-n", min=1, max=100_000, help="How many tasks.")] = 240,
    seconds: Annotated[float, typer.Option("--seconds", min=1.0, help="Give up after this long.")] = 60.0,
    work_scale: Annotated[float, typer.Option("--work-scale", min=0.0, help="Multiply each task's work time.")] = 1.0,
    seed: Annotated[int, typer.Option("--seed", help="Workload random seed.")] = 7,
    dsn: DsnOption = None,
) -> None:
    """A live demonstration: mixed workload, three workers, and proof the rules held."""
    from ..queue import TaskQueue

    resolved_dsn, _ = settings(ctx, dsn, None)
    # The workers' own logs would tear the live view; their outcomes show in the summary.
    quiet = logging.getLogger("taskqueue")
    quiet.addHandler(logging.NullHandler())
    quiet.propagate = False
    quiet.setLevel(logging.ERROR)

    err.print("[dim]starting the database and preparing schema taskqueue_demo…[/dim]")
    tq = TaskQueue(resolved_dsn, schema=DEMO_SCHEMA, pool_size=5, max_overflow=10)
    try:
        tq.migrate()
        with tq.engine.begin() as conn:
            tq.store.delete_everything(conn)
        limits: dict[str, int] = {}
        for network, limit in NETWORKS:
            name = network_pool(network)
            tq.set_pool_limit(name, limit)
            limits[name] = limit
        specs = workload(tasks, seed)
        tq.enqueue_many(specs)
        held = run_workers(tq, resolved_dsn, tasks, seconds, work_scale, limits)
    finally:
        tq.close()
    if not held:
        raise typer.Exit(1)


def run_workers(
    tq: TaskQueue, dsn: str | None, count: int, seconds: float, work_scale: float, limits: dict[str, int]
) -> bool:
    from ..queue import TaskQueue

    recorder = Recorder()
    recorder.expected = count
    workers = make_workers(recorder, work_scale)
    queues = [TaskQueue(tq.dsn, schema=DEMO_SCHEMA, pool_size=4, max_overflow=16) for _ in workers]
    threads = [
        threading.Thread(target=w.run, args=(q,), name=f"demo-{w.name}", daemon=True)
        for w, q in zip(workers, queues, strict=True)
    ]
    progress = Progress(
        TextColumn("tasks done"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), console=out
    )
    bar_id = progress.add_task("done", total=count)
    db_peak: dict[str, int] = defaultdict(int)
    db_running: dict[str, int] = {}
    began = time.monotonic()
    timed_out = False
    try:
        for thread in threads:
            thread.start()
        with Live(live_view(progress, recorder, limits, db_running), console=out, refresh_per_second=10) as live:
            while not recorder.all_done.is_set():
                if time.monotonic() - began > seconds:
                    timed_out = True
                    break
                if not any(t.is_alive() for t in threads):
                    break
                for pool in tq.pools():
                    db_running[pool.name] = pool.running
                    db_peak[pool.name] = max(db_peak[pool.name], pool.running)
                progress.update(bar_id, completed=recorder.finished)
                live.update(live_view(progress, recorder, limits, db_running))
                recorder.all_done.wait(0.1)
            progress.update(bar_id, completed=recorder.finished)
            db_running.clear()
            live.update(live_view(progress, recorder, limits, db_running))
    finally:
        for worker in workers:
            worker.stop()
        for thread in threads:
            thread.join(timeout=10)
        for q in queues:
            q.close()
    elapsed = time.monotonic() - began
    final = tq.tasks(queue=QUEUE, limit=count + 1000)
    out.print()
    verdicts = summarize(final, recorder, limits, db_peak)
    if timed_out:
        verdicts.append(Verdict("finished in time", False, f"not done after {seconds:g} s"))
    rules = Table(title="rules", title_justify="left")
    rules.add_column("rule")
    rules.add_column("held")
    rules.add_column("detail")
    for v in verdicts:
        rules.add_row(v.rule, v.held_text if v.held else "NO", v.detail, style=None if v.held else "bold red")
    out.print(rules)
    held = all(v.held for v in verdicts)
    rate = recorder.finished / elapsed if elapsed > 0 else 0.0
    out.print(
        f"{recorder.finished} tasks in {elapsed:.1f} s ({rate:.0f}/s) by {len(workers)} workers: "
        + ("all rules held" if held else "SOME RULES WERE BROKEN")
    )
    return held


def register(app: typer.Typer) -> None:
    app.command("demo", rich_help_panel=RUN)(demo)
