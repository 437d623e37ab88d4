"""Drain: real worker processes of each library empty a queue, side by side, in one run.

taskqueue runs as ``taskqueue worker bench.drain_app:worker`` processes (the
CLI a user runs); PGQueuer as ``PgQueuer(AsyncpgDriver(conn)).run(batch_size)``
on uvloop, which is what ``pgq run`` does. For every cell:

1. the worker processes start against an empty queue; each says when it is
   connected and LISTENing (imports, connecting and start-up are off the clock);
2. N jobs are enqueued in one transaction: its commit releases every worker at
   once, and the clock starts when it returns;
3. the clock stops at the first look at the table that shows nothing queued
   or running (committed state), polled every few milliseconds.

Each library is measured at its defaults and over a sweep of its settings (the
best is published), with 1 and 2 processes, with a no-op handler, a 1 ms sleep
and 1 ms of CPU. Rounds are interleaved, each cell's figure is the median.
Latency (enqueue to handler start, idle and busy) is measured on our worker at
its defaults.

This module runs the cells and tabulates them; what a cell is and how each
library runs is in ``drain_sides``, the latency and enqueue checks in
``drain_checks``.
"""

from __future__ import annotations

import os
import statistics
import tempfile
import time
from typing import Any

import psycopg

from . import common, drain_app, peers
from .cpu_use import CpuUse
from .drain_checks import enqueue_check, latency
from .drain_sides import PEER_HANDLER, SCHEMA, Cell, Ours, Pgq, Workers, cells

DEFAULT_ROWS = 20_000
#: The 1 ms CPU handler runs at most ~1,000 jobs/s a core: fewer jobs keep its cells short.
CPU_ROWS_DIVISOR = 5
ROUNDS = 2
POLL = 0.004
HANDLERS = ("noop", "sleep", "cpu", "async_noop", "async_sleep", "async_cpu")
#: Handlers that burn 1 ms of CPU a job: fewer jobs a cell (CPU_ROWS_DIVISOR).
CPU_HANDLERS = ("cpu", "async_cpu")


def _connect(dsn: str, search_path: str | None) -> psycopg.Connection[Any]:
    conn = psycopg.connect(dsn, autocommit=True)
    if search_path is not None:
        conn.execute("SELECT set_config('search_path', %s, false)", (f'"{search_path}"',))
    return conn


def _take_loop_log(path: str | None) -> float | None:
    """The job loop's CPU a job from a cell's ``BENCH_CPU_LOG`` file, which is then removed (None: no file)."""
    if path is None:
        return None
    try:
        return drain_app.job_loop_us(path)
    finally:
        os.unlink(path)


def run_cell(side: Ours | Pgq, cell: Cell, n: int, bar: Any, task: Any) -> dict[str, Any]:
    side.reset()
    loop_log = None
    if cell.handler in CPU_HANDLERS:  # each job's loop timed: the machine's speed moves between cells
        fd, loop_log = tempfile.mkstemp(prefix="bench-cpu-loop-")
        os.close(fd)
    workers = Workers.start(side.command(cell), cell.processes, cell.handler,
                            extra_env={"BENCH_CPU_LOG": loop_log} if loop_log else None)
    try:
        with _connect(side.dsn, side.search_path) as conn:
            use = CpuUse([p.pid for p in workers.procs])
            bar.update(task, description=cell.label, completed=0, total=n)
            side.enqueue(n)
            start = time.perf_counter()
            before = use.read()
            next_show = start
            while True:
                now = time.perf_counter()
                if now >= next_show:
                    bar.update(task, completed=int(conn.execute(side.done_sql).fetchone()[0]))
                    next_show = now + 0.25
                if not conn.execute(side.left_sql).fetchone()[0]:
                    elapsed = time.perf_counter() - start
                    after = use.read()
                    break
                if now - start > 600:
                    raise RuntimeError(f"{cell.label}: not drained after 600 s")
                time.sleep(POLL)
            done = int(conn.execute(side.done_sql).fetchone()[0])
            bar.update(task, completed=done)
    finally:
        workers.stop()
        job_loop = _take_loop_log(loop_log)
    if done != n:
        raise RuntimeError(f"{cell.label}: {done} of {n} jobs recorded done")
    cpu = use.per_job(before, after, done)
    if loop_log:
        # The job's own loop, and the rest of the worker's CPU a job: what the library itself costs.
        cpu["job_loop_us"] = job_loop
        cpu["outside_job_us"] = (round(cpu["worker_us_per_job"] - cpu["job_loop_us"], 1)
                                 if cpu["job_loop_us"] is not None and cpu["worker_us_per_job"] is not None else None)
    return {"jobs": done, "seconds": elapsed, "per_second": done / elapsed, "cpu": cpu}


# -- the whole run ------------------------------------------------------------
def _median_cpu(readings: list[dict[str, Any]]) -> dict[str, Any]:
    """Each CPU figure's median over a cell's rounds (None where /proc could not tell)."""
    out: dict[str, Any] = {}
    for key in readings[0]:
        values = [r[key] for r in readings if r[key] is not None]
        out[key] = round(statistics.median(values), 2) if values else None
    return out


def best_of(figures: dict[str, dict[str, Any]], library: str, handler: str, processes: int) -> dict[str, Any]:
    mine = [f for f in figures.values()
            if f["library"] == library and f["handler"] == handler and f["processes"] == processes]
    return max(mine, key=lambda f: f["per_second"])


def default_of(figures: dict[str, dict[str, Any]], library: str, handler: str, processes: int) -> dict[str, Any]:
    return next(f for f in figures.values() if f["library"] == library and f["handler"] == handler
                and f["processes"] == processes and f["settings"] == "defaults")


def run(opts: common.Options) -> dict[str, Any]:
    n = opts.rows or DEFAULT_ROWS
    dsn = opts.dsn
    wanted = opts.only.split(",") if opts.only else [*HANDLERS, "latency", "enqueue"]
    handlers = tuple(h for h in HANDLERS if h in wanted)
    versions = peers.available()
    sides: dict[str, Ours | Pgq] = {"taskqueue": Ours(dsn)}
    if versions["pgqueuer"]:
        sides["pgqueuer"] = Pgq(dsn)
    todo = [c for c in cells(handlers) if c.library in sides]
    if os.environ.get("BENCH_FILTER"):  # e.g. "x2", "taskqueue noop" or "cpu x2 inline|cpu x2 batch=500"
        wanted_cells = os.environ["BENCH_FILTER"].split("|")
        todo = [c for c in todo if any(w in c.label for w in wanted_cells)]
    rounds = int(os.environ.get("BENCH_ROUNDS", ROUNDS))
    if any(c.handler in CPU_HANDLERS for c in todo) and not os.environ.get("BENCH_CPU_LOOPS"):
        # One count of work for every process of both libraries, so that a CPU job is the same job on each side.
        os.environ["BENCH_CPU_LOOPS"] = str(drain_app.calibrate())
    samples: dict[Cell, list[dict[str, Any]]] = {c: [] for c in todo}
    load_before = os.getloadavg()
    with common.progress() as bar:
        overall = bar.add_task("drain cells", total=len(todo) * rounds)
        current = bar.add_task("", total=n)
        for r in range(rounds):
            # Interleaved: every round runs every cell, in an order that alternates the libraries.
            order = todo if r % 2 == 0 else list(reversed(todo))
            for cell in order:
                rows = n // CPU_ROWS_DIVISOR if cell.handler in CPU_HANDLERS else n
                samples[cell].append(run_cell(sides[cell.library], cell, rows, bar, current))
                bar.advance(overall)
    figures: dict[str, dict[str, Any]] = {}
    for cell, runs in samples.items():
        rates = [s["per_second"] for s in runs]
        figures[cell.label] = {**cell.as_dict(), "jobs": runs[0]["jobs"], "per_second": statistics.median(rates),
                               "rounds": rates, "cpu": _median_cpu([s["cpu"] for s in runs])}
    table = []
    for handler in handlers:
        for processes in (1, 2):
            row: dict[str, Any] = {"handler": handler, "processes": processes}
            for kind, pick in (("defaults", default_of), ("best", best_of)):
                for library in sides:
                    peer = PEER_HANDLER.get(handler, handler) if library == "pgqueuer" else handler
                    try:
                        got = pick(figures, library, peer, processes)
                    except (StopIteration, ValueError):  # a subset of the cells was run (BENCH_FILTER)
                        continue
                    row[f"{library}_{kind}"] = {"per_second": got["per_second"], "settings": got["settings"],
                                                "cpu": got.get("cpu")}
                if f"taskqueue_{kind}" in row and f"pgqueuer_{kind}" in row:
                    row[f"ratio_{kind}"] = common.ratio(row[f"taskqueue_{kind}"]["per_second"],
                                                        row[f"pgqueuer_{kind}"]["per_second"])
            table.append(row)
    result: dict[str, Any] = {
        "scenario": "drain",
        "rows": n,
        "cpu_rows": n // CPU_ROWS_DIVISOR,
        "rounds": rounds,
        "cpu_job_loops": int(os.environ.get("BENCH_CPU_LOOPS") or 0) or None,
        "peers": versions,
        "load_average_before": load_before,
        "figures": figures,
        "table": table,
    }
    if "latency" in wanted:
        result["latency"] = latency(dsn, probes=200, backlog=n)
    if "latency_cpu" in wanted:  # not in the default run: its backlog takes a few seconds of CPU to drain
        if not os.environ.get("BENCH_CPU_LOOPS"):
            os.environ["BENCH_CPU_LOOPS"] = str(drain_app.calibrate())
        result["latency_cpu"] = latency(dsn, probes=200, backlog=n // CPU_ROWS_DIVISOR, cpu=True)
    if "enqueue" in wanted:
        result["enqueue"] = enqueue_check(dsn, sides.get("pgqueuer"))  # type: ignore[arg-type]
    result["load_average_after"] = os.getloadavg()
    targets = {}
    if "pgqueuer" in sides:
        for row in table:
            key = f"{row['handler']}_x{row['processes']}"
            if "ratio_defaults" in row:
                targets[f"{key}_defaults_ge_1.5x"] = row["ratio_defaults"] >= 1.5
            if "ratio_best" in row:
                targets[f"{key}_best_ge_1.0x"] = row["ratio_best"] >= 1.0
    if "latency" in result:
        for phase in ("idle", "busy"):
            lat = result["latency"][phase]
            targets[f"latency_{phase}_p50_lt_10ms"] = lat["p50_ms"] < 10
            targets[f"latency_{phase}_p99_lt_50ms"] = lat["p99_ms"] < 50
    if "enqueue" in result and "pgqueuer_single" in result["enqueue"]:
        e = result["enqueue"]
        targets["enqueue_single_ahead"] = e["taskqueue_single"]["per_second"] > e["pgqueuer_single"]["per_second"]
        targets["enqueue_batch_ahead"] = e["taskqueue_batch"]["per_second"] > e["pgqueuer_batch"]["per_second"]
    result["targets"] = targets
    common.drop_schema(dsn, SCHEMA)
    return result


def markdown(result: dict[str, Any]) -> str:
    """The drain table of docs/performance.md, from a result of :func:`run`."""

    def knobs(settings: Any) -> str:
        return "defaults" if settings == "defaults" else ", ".join(f"{k} {v}" for k, v in settings.items())

    lines = [
        "| handler | processes | taskqueue defaults | PGQueuer defaults | ratio (goal ≥ 1.5×) "
        "| taskqueue best | PGQueuer best | ratio (goal ≥ 1.0×) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for row in result["table"]:
        if "ratio_defaults" not in row or "ratio_best" not in row:
            continue
        cells = [row["handler"], str(row["processes"])]
        for kind in ("defaults", "best"):
            ours, theirs = row[f"taskqueue_{kind}"], row[f"pgqueuer_{kind}"]
            suffix = "" if kind == "defaults" else f" ({knobs(ours['settings'])})"
            theirs_suffix = "" if kind == "defaults" else f" ({knobs(theirs['settings'])})"
            cells += [f"{ours['per_second']:,.0f}{suffix}", f"{theirs['per_second']:,.0f}{theirs_suffix}",
                      f"{row[f'ratio_{kind}']:.2f}×"]
        lines.append("| " + " | ".join(cells) + " |")
    if "latency" in result:
        lines += ["", "| latency, enqueue → handler start (1 worker, defaults) | n | p50 | p90 | p99 |",
                  "|---|---|---|---|---|"]
        for phase in ("idle", "busy"):
            lat = result["latency"][phase]
            lines.append(f"| {phase} | {lat['n']} | {lat['p50_ms']:.1f} ms | {lat['p90_ms']:.1f} ms "
                         f"| {lat['p99_ms']:.1f} ms |")
    lines += cpu_lines(result)
    return "\n".join(lines)


def cpu_lines(result: dict[str, Any]) -> list[str]:
    """Where the CPU went in the defaults and best cells (medians over the rounds; see bench/cpu_use.py)."""

    def show(value: Any, unit: str = "") -> str:
        return "–" if value is None else f"{value:,}{unit}"

    lines = ["", "| handler | processes | cell | jobs/s | cores busy | worker CPU a job | of it, the job's loop "
             "| the rest | server CPU a job | worker context switches a job |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for row in result["table"]:
        for kind in ("defaults", "best"):
            for library in ("taskqueue", "pgqueuer"):
                got = row.get(f"{library}_{kind}")
                if got is None or not got.get("cpu"):
                    continue
                cpu = got["cpu"]
                lines.append(f"| {row['handler']} | {row['processes']} | {library} {kind} | {got['per_second']:,.0f} "
                             f"| {show(cpu['cores_busy'])} | {show(cpu['worker_us_per_job'], ' µs')} "
                             f"| {show(cpu.get('job_loop_us'), ' µs')} | {show(cpu.get('outside_job_us'), ' µs')} "
                             f"| {show(cpu['server_us_per_job'], ' µs')} | {show(cpu['worker_switches_per_job'])} |")
    return lines if len(lines) > 3 else []
