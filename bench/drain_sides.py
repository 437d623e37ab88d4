"""The drain benchmark's two sides: the cells it runs, each library's worker command and enqueue, the processes.

A cell is one library, one handler, a process count and the settings it runs
with; ``Ours`` and ``Pgq`` say how each library starts its workers, fills its
queue and tells when it is empty; ``Workers`` starts them against an empty queue
and waits until each has said it is ready, so start-up stays off the clock.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from typing import Any

import psycopg

from . import common, peers

SCHEMA = "bench_drain"
READY_TIMEOUT = 60.0
#: taskqueue only; set against PGQueuer's own (async) handler of the same work.
PEER_HANDLER = {"async_noop": "noop", "async_sleep": "sleep", "async_cpu": "cpu"}
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
