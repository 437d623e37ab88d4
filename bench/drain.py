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
"""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from typing import Any

import psycopg

from . import common, drain_app, peers
from .cpu_use import CpuUse

SCHEMA = "bench_drain"
DEFAULT_ROWS = 20_000
#: The 1 ms CPU handler runs at most ~1,000 jobs/s a core: fewer jobs keep its cells short.
CPU_ROWS_DIVISOR = 5
ROUNDS = 2
POLL = 0.004
READY_TIMEOUT = 60.0
HANDLERS = ("noop", "sleep", "cpu", "async_noop", "async_sleep", "async_cpu")
#: taskqueue only; set against PGQueuer's own (async) handler of the same work.
PEER_HANDLER = {"async_noop": "noop", "async_sleep": "sleep", "async_cpu": "cpu"}
#: Handlers that burn 1 ms of CPU a job: fewer jobs a cell (CPU_ROWS_DIVISOR).
CPU_HANDLERS = ("cpu", "async_cpu")
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@dataclass(frozen=True)
class Cell:
    library: str  # "taskqueue" or "pgqueuer"
    handler: str
    processes: int
    settings: tuple[tuple[str, int], ...] = ()  # () = the library's defaults

    @property
    def label(self) -> str:
        knobs = " ".join(f"{k}={v}" for k, v in self.settings) or "defaults"
        return f"{self.library} {self.handler} x{self.processes} {knobs}"

    def as_dict(self) -> dict[str, Any]:
        return {"library": self.library, "handler": self.handler, "processes": self.processes,
                "settings": dict(self.settings) or "defaults"}


#: Settings swept per library (defaults are always measured too).
OURS_SWEEP: tuple[tuple[tuple[str, int], ...], ...] = (
    (("concurrency", 32),),
    (("concurrency", 64),),
    (("claim-ahead", 500),),
    (("concurrency", 64), ("claim-ahead", 500)),
)
#: For the CPU handler, fewer handler threads too: its work holds the GIL, so
#: threads beyond one per core only take turns at it (and with the claimer);
#: and the inline lane, which runs the handlers on the claim loop's thread.
OURS_CPU_SWEEP: tuple[tuple[tuple[str, int], ...], ...] = (
    (("concurrency", 1),),
    (("concurrency", 2),),
    (("inline", 1),),
)
#: Settings passed as a bare flag (``--inline``), not ``--key value``.
FLAGS = frozenset({"inline"})
#: The async lane's knob, for the ``async def`` handler; and the inline lane, whose event loop is the
#: claim loop's own thread (a group of at most async-concurrency coroutines at a time).
OURS_ASYNC_SWEEP: tuple[tuple[tuple[str, int], ...], ...] = (
    (("async-concurrency", 300),),
    (("async-concurrency", 1000),),
    (("inline", 1),),
)
PGQ_SWEEP: tuple[tuple[tuple[str, int], ...], ...] = (
    (("batch", 100),),
    (("batch", 500),),
    (("batch", 100), ("instances", 2)),
    (("batch", 500), ("instances", 2)),
)


def cells(handlers: tuple[str, ...]) -> list[Cell]:
    out = []
    for handler in handlers:
        for processes in (1, 2):
            for library, sweep in (("taskqueue", OURS_SWEEP), ("pgqueuer", PGQ_SWEEP)):
                if handler in PEER_HANDLER:  # the async lane's knob, and no second PGQueuer run
                    if library == "taskqueue":
                        out.append(Cell(library, handler, processes))
                        out.extend(Cell(library, handler, processes, s) for s in OURS_ASYNC_SWEEP)
                    continue
                out.append(Cell(library, handler, processes))
                out.extend(Cell(library, handler, processes, s) for s in sweep)
                if handler == "cpu" and library == "taskqueue":
                    out.extend(Cell(library, handler, processes, s) for s in OURS_CPU_SWEEP)
    return out


# -- the two libraries' sides ---------------------------------------------------
class Ours:
    name = "taskqueue"

    def __init__(self, dsn: str) -> None:
        self.dsn = dsn
        common.fresh_queue(dsn, SCHEMA).close()

    def reset(self) -> None:
        common.execute(self.dsn, SCHEMA, "TRUNCATE tasks RESTART IDENTITY")

    def command(self, cell: Cell) -> list[str]:
        cmd = [sys.executable, "-m", "taskqueue", "worker", "bench.drain_app:worker", "--dsn", self.dsn,
               "--schema", SCHEMA, "--no-migrate", *os.environ.get("BENCH_OURS_ARGS", "").split()]
        for key, value in cell.settings:
            cmd += [f"--{key}"] if key in FLAGS else [f"--{key}", str(value)]
        return cmd

    def enqueue(self, n: int) -> None:
        from taskqueue import TaskQueue

        with TaskQueue(self.dsn, schema=SCHEMA) as tq:
            tq.enqueue_many([{"payload": None}] * n)  # one transaction: its commit releases the workers

    # One probe of a partial index each (queued and claimable, queued and parked, running): the
    # plain "state IN (...)" scanned the table, half a millisecond each 4 ms look, on our side only.
    left_sql = ("SELECT EXISTS (SELECT 1 FROM tasks WHERE state = 'queued' AND NOT parked)"
                " OR EXISTS (SELECT 1 FROM tasks WHERE state = 'queued' AND parked)"
                " OR EXISTS (SELECT 1 FROM tasks WHERE state = 'running')")
    done_sql = "SELECT count(*) FROM tasks WHERE state = 'done'"
    search_path = SCHEMA


class Pgq:
    name = "pgqueuer"

    def __init__(self, dsn: str) -> None:
        # A database of its own, named after ours: other scenarios reinstall bench_pgqueuer.
        base = psycopg.conninfo.conninfo_to_dict(dsn).get("dbname", "bench")
        self.dsn = common.ensure_database(common.with_dbname(dsn, f"{base}_drain_pgqueuer"))
        peers.pgq_reset(self.dsn)
        self.url = _url(self.dsn)  # asyncpg takes URLs only

    def reset(self) -> None:
        common.execute(self.dsn, None, "TRUNCATE pgqueuer, pgqueuer_log, pgqueuer_statistics",
                       "VACUUM ANALYZE pgqueuer")

    def command(self, cell: Cell) -> list[str]:
        knobs = dict(cell.settings)
        return [sys.executable, "-m", "bench.drain_app", "pgq", "--dsn", self.url,
                "--batch", str(knobs.get("batch", 10)), "--instances", str(knobs.get("instances", 1))]

    def enqueue(self, n: int) -> None:
        async def go() -> None:
            import asyncpg
            from pgqueuer.db import AsyncpgDriver
            from pgqueuer.queries import Queries

            conn = await asyncpg.connect(self.url)
            await Queries(AsyncpgDriver(conn)).enqueue(["noop"] * n, [None] * n, [0] * n)  # one statement
            await conn.close()

        asyncio.run(go())

    left_sql = "SELECT EXISTS (SELECT 1 FROM pgqueuer WHERE status IN ('queued', 'picked'))"
    done_sql = "SELECT count(*) FROM pgqueuer_log WHERE status = 'successful'"
    search_path = None


def _url(dsn: str) -> str:
    from urllib.parse import quote

    p = psycopg.conninfo.conninfo_to_dict(dsn)
    auth = quote(str(p.get("user", ""))) + (":" + quote(str(p["password"])) if p.get("password") else "")
    host = f"{p.get('host', 'localhost')}:{p.get('port', 5432)}"
    return f"postgresql://{auth}{'@' if auth else ''}{host}/{quote(str(p.get('dbname', 'postgres')))}"


# -- one cell -----------------------------------------------------------------
@dataclass
class Workers:
    """Worker processes started against an empty queue, each announcing itself when ready."""

    procs: list[subprocess.Popen[bytes]] = field(default_factory=list)
    ready_dir: str = ""
    logs: list[Any] = field(default_factory=list)

    @classmethod
    def start(cls, cmd: list[str], count: int, handler: str, extra_env: dict[str, str] | None = None) -> Workers:
        self = cls(ready_dir=tempfile.mkdtemp(prefix="bench-ready-"))
        env = {**os.environ, "BENCH_HANDLER": handler, "BENCH_READY": self.ready_dir,
               "PYTHONPATH": ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""), **(extra_env or {})}
        for _ in range(count):
            log = tempfile.TemporaryFile()
            self.logs.append(log)
            self.procs.append(subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=log, stderr=log))
        deadline = time.monotonic() + READY_TIMEOUT
        while len(os.listdir(self.ready_dir)) < count:
            if time.monotonic() > deadline or any(p.poll() is not None for p in self.procs):
                tail = self.tail()
                self.stop()
                raise RuntimeError(f"workers did not become ready: {tail}")
            time.sleep(0.02)
        return self

    def tail(self) -> str:
        out = []
        for log in self.logs:
            log.seek(0)
            out.append(log.read()[-2000:].decode(errors="replace"))
        return "\n".join(out)

    def stop(self) -> None:
        for p in self.procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in self.procs:
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        for log in self.logs:
            log.close()
        shutil.rmtree(self.ready_dir, ignore_errors=True)


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


# -- latency ------------------------------------------------------------------
#: Probes between two top-ups of the busy phase's backlog (a worker drains 20,000 no-ops in under a second
#: on a fast day, so a fixed top-up every 25 probes let the backlog run dry before the last probe).
TOP_UP_EVERY = 5

def latency(dsn: str, probes: int, backlog: int, *, cpu: bool = False) -> dict[str, Any]:
    """Enqueue-to-handler-start of single tasks on one default worker: idle, then behind a draining backlog.

    Measured from the moment ``enqueue`` returned (the task is committed) to
    the handler's first line, both on the machine's wall clock;
    ``from_call`` measures from before the call instead.

    Busy: the worker is draining ``backlog`` no-op tasks, topped up to
    ``backlog`` every ``TOP_UP_EVERY`` probes so that it lasts past the last
    probe on a fast day as on a slow one (``backlog_left_at_last_probe``); each probe is
    enqueued at a more urgent priority (lower number), so it waits for the
    worker's next claim round, not for the backlog. ``cpu``: the backlog's
    tasks are CPU jobs (1 ms each), so the worker's claim rounds are far
    apart; ``BENCH_OURS_ARGS`` gives the worker's flags (``--inline``).
    """
    from taskqueue import TaskQueue

    ours = Ours(dsn)
    stamps = tempfile.NamedTemporaryFile(prefix="bench-stamps-", delete=False)
    stamps.close()
    result: dict[str, Any] = {}
    with common.progress() as bar:
        task = bar.add_task("latency", total=2 * probes)
        for phase in ("idle", "busy"):
            ours.reset()
            open(stamps.name, "w").close()
            workers = Workers.start(ours.command(Cell("taskqueue", "stamp", 1)), 1, "stamp",
                                    {"BENCH_STAMPS": stamps.name, **({"BENCH_STAMP_CPU": "1"} if cpu else {})})
            try:
                with TaskQueue(dsn, schema=SCHEMA, pool_size=1) as tq:
                    tq.stats()  # connect before the first probe
                    if phase == "busy":
                        tq.enqueue_many([{"payload": None}] * backlog)
                    sent: dict[int, tuple[float, float]] = {}
                    for k in range(probes):
                        if phase == "busy" and k and k % TOP_UP_EVERY == 0:  # keep it busy until the last probe
                            queued = tq.stats().by_state["queued"]
                            if queued < backlog:  # topped up to what it started with, however fast it drains
                                tq.enqueue_many([{"payload": None}] * (backlog - queued))
                        before = time.time()
                        probe_id = tq.enqueue({"probe": True}, priority=-1)
                        sent[probe_id] = (before, time.time())
                        bar.advance(task)
                        time.sleep(0.01)
                    left = tq.stats().by_state["queued"]  # at the last probe: > 0 means busy throughout
                    deadline = time.monotonic() + 60
                    while time.monotonic() < deadline:
                        counts = tq.stats().by_state
                        if not counts["queued"] + counts["running"]:
                            break
                        time.sleep(0.05)
            finally:
                workers.stop()
            with open(stamps.name) as f:
                started = {int(a): float(b) for a, b in (line.split() for line in f if line.strip())}
            if set(started) != set(sent):
                raise RuntimeError(f"latency {phase}: {len(started)} of {len(sent)} probes ran")
            # From the moment enqueue() returned (its commit is done); "from_call" adds the enqueue itself.
            summary = common.latency_summary([started[i] - sent[i][1] for i in sent])
            summary["from_call"] = common.latency_summary([started[i] - sent[i][0] for i in sent])
            summary["backlog"] = backlog if phase == "busy" else 0
            summary["backlog_left_at_last_probe"] = left
            result[phase] = summary
    os.unlink(stamps.name)
    return result


# -- enqueue, side by side ----------------------------------------------------
def enqueue_check(dsn: str, pgq: Pgq | None, rounds: int = 7, single: int = 300, batch: int = 10_000) -> dict[str, Any]:
    """Single and 10k-batch enqueue of both libraries, interleaved rounds (PGQueuer on asyncpg + uvloop)."""
    from taskqueue import TaskQueue

    rates: dict[str, list[float]] = {"taskqueue_single": [], "taskqueue_batch": []}
    if pgq is not None:
        rates |= {"pgqueuer_single": [], "pgqueuer_batch": []}

    async def theirs(n: int, one_by_one: bool) -> float:
        import asyncpg
        from pgqueuer.db import AsyncpgDriver
        from pgqueuer.queries import Queries

        assert pgq is not None
        conn = await asyncpg.connect(pgq.url)
        q = Queries(AsyncpgDriver(conn))
        t0 = time.perf_counter()
        if one_by_one:
            for _ in range(n):
                await q.enqueue("noop", None)
        else:
            await q.enqueue(["noop"] * n, [None] * n, [0] * n)
        rate = n / (time.perf_counter() - t0)
        await conn.close()
        return rate

    common.fresh_queue(dsn, SCHEMA).close()
    with TaskQueue(dsn, schema=SCHEMA) as tq:
        tq.stats()
        for _ in range(rounds):
            t0 = time.perf_counter()
            for _ in range(single):
                tq.enqueue(None)
            rates["taskqueue_single"].append(single / (time.perf_counter() - t0))
            t0 = time.perf_counter()
            tq.enqueue_many([{"payload": None}] * batch)
            rates["taskqueue_batch"].append(batch / (time.perf_counter() - t0))
            if pgq is not None:
                import uvloop

                rates["pgqueuer_single"].append(uvloop.run(theirs(single, True)))
                rates["pgqueuer_batch"].append(uvloop.run(theirs(batch, False)))
    return {k: {"per_second": statistics.median(v), "rounds": v} for k, v in rates.items()}


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
