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

import logging
import random
import threading
import time
from collections import defaultdict
from typing import Annotated, Any

import typer
from rich.console import Group
from rich.live import Live
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
)
from rich.table import Table

from ..network import network_pool
from ..queue import TaskQueue
from ..store.requests import Op, execute
from ..task import EnqueueSpec, Task
from .common import DsnOption, err, out, settings
from .demo_record import Recorder, Verdict, summarize

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


def delete_everything() -> Op[None]:
    """Empty the demo's own schema: tasks and pools together, so no pool count outlives its tasks."""
    yield from execute("delete_all_tasks")
    yield from execute("delete_all_pools")


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


def workload(count: int, seed: int) -> list[EnqueueSpec]:
    rng = random.Random(seed)
    specs: list[EnqueueSpec] = []
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


def demo(
    ctx: typer.Context,
    tasks: Annotated[int, typer.Option("--tasks", "-n", min=1, max=100_000, help="How many tasks.")] = 240,
    seconds: Annotated[float, typer.Option("--seconds", min=1.0, help="Give up after this long.")] = 60.0,
    work_scale: Annotated[float, typer.Option("--work-scale", min=0.0, help="Multiply each task's work time.")] = 1.0,
    seed: Annotated[int, typer.Option("--seed", help="Workload random seed.")] = 7,
    dsn: DsnOption = None,
) -> None:
    """A live demonstration: mixed workload, three workers, and proof the rules held."""
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
        tq.db.run(delete_everything())
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
    verdicts = summarize(final, recorder, limits, db_peak, WORKERS)
    if timed_out:
        verdicts.append(Verdict("finished in time", False, f"not done after {seconds:g} s"))
    rules = Table(title="rules", title_justify="left")
    rules.add_column("rule")
    rules.add_column("held")
    rules.add_column("detail")
    for v in verdicts:
        rules.add_row(v.rule, "yes" if v.held else "NO", v.detail, style=None if v.held else "bold red")
    out.print(rules)
    held = all(v.held for v in verdicts)
    rate = recorder.finished / elapsed if elapsed > 0 else 0.0
    out.print(
        f"{recorder.finished} tasks in {elapsed:.1f} s ({rate:.0f}/s) by {len(workers)} workers: "
        + ("all rules held" if held else "SOME RULES WERE BROKEN")
    )
    return held


def register(app: typer.Typer) -> None:
    app.command("demo")(demo)
