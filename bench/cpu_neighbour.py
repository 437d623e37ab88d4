"""``python -m bench cpu_neighbour``: does work on the other core slow a job's loop on this one?

The drain's CPU cells found the same job's loop (``drain_app.spin``) running
in two modes, about 400 or about 750 µs for 15,000 loops, one run to the
next and within one phase, with one thread as with many, and no steal time
counted. This scenario asks whether what runs on the *other* core sets the
mode. The timed process is pinned to the first CPU and runs the job over and
over for ``--seconds`` (default 3), timing each on its thread's clock, while
the second CPU is:

- ``idle``: nothing of ours runs there;
- ``spin``: another process, pinned there, runs the same loop without end
  (Python, no memory traffic to speak of);
- ``server``: a PostgreSQL backend, pinned there, runs a query that computes
  (``generate_series`` summed), as the server does beside a worker.

Each condition runs ``ROUNDS`` times, interleaved, and only ratios to
``idle`` are compared. Two CPUs that are separate cores barely slow each
other on such loops; two hardware threads of one core (which a virtual
machine's CPU list need not show) slow each other by a third or more.
``--rows`` sets the loops a job (default 16,000). Linux only (CPU affinity).
"""

from __future__ import annotations

import multiprocessing
import os
import statistics
import threading
import time
from typing import Any

import psycopg

from . import common, gil_threads
from .drain_app import spin

CONDITIONS = ("idle", "spin", "server")
ROUNDS = 3
DEFAULT_LOOPS = 16_000
#: The server's busy query: about a second of one core's CPU, run again until told to stop.
SERVER_WORK = "SELECT sum(g) FROM generate_series(1, 20000000) g"


def _spin_forever(cpu: int) -> None:
    os.sched_setaffinity(0, {cpu})
    while True:
        spin(100_000)


class Neighbour:
    """What runs on the second CPU while the first one's loop is timed."""

    def __init__(self, kind: str, cpu: int, dsn: str) -> None:
        self.kind, self.cpu, self.dsn = kind, cpu, dsn
        self._proc: Any = None
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._conn: psycopg.Connection[Any] | None = None

    def __enter__(self) -> Neighbour:
        if self.kind == "spin":
            self._proc = multiprocessing.get_context("spawn").Process(target=_spin_forever, args=(self.cpu,),
                                                                      daemon=True)
            self._proc.start()
        elif self.kind == "server":
            self._conn = psycopg.connect(self.dsn, autocommit=True)
            pid = self._conn.execute("SELECT pg_backend_pid()").fetchone()[0]  # type: ignore[index]
            os.sched_setaffinity(pid, {self.cpu})  # the server runs on this machine (the scenario checks)
            self._thread = threading.Thread(target=self._serve, daemon=True)
            self._thread.start()
        time.sleep(0.3)  # let the neighbour get going before the clock starts
        return self

    def _serve(self) -> None:
        assert self._conn is not None
        try:
            while not self._stop.is_set():
                self._conn.execute(SERVER_WORK)
        except psycopg.errors.QueryCanceled:
            pass  # the cancel sent by __exit__

    def __exit__(self, *exc: object) -> None:
        if self._proc is not None:
            self._proc.kill()
            self._proc.join()
        if self._thread is not None and self._conn is not None:
            self._stop.set()
            self._conn.cancel_safe()
            self._thread.join()
            self._conn.close()


def _serve_here(dsn: str) -> bool:
    """Whether the server's backends are processes of this machine that this user may pin (else no ``server``)."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        pid = conn.execute("SELECT pg_backend_pid()").fetchone()[0]  # type: ignore[index]
        try:
            with open(f"/proc/{pid}/comm") as f:
                if f.read().strip() != "postgres":
                    return False
            os.sched_setaffinity(pid, os.sched_getaffinity(pid))  # a no-op that fails without the right
        except OSError:  # not here, or another user's process
            return False
    return True


def run(opts: common.Options) -> dict[str, Any]:
    if not hasattr(os, "sched_setaffinity"):
        raise SystemExit("cpu_neighbour needs CPU affinity (Linux)")
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2:
        raise SystemExit("cpu_neighbour needs two CPUs")
    here, there = cpus[0], cpus[1]
    loops, seconds = opts.rows or DEFAULT_LOOPS, opts.seconds or 3.0
    conditions = CONDITIONS if _serve_here(opts.dsn) else CONDITIONS[:2]
    before = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {here})
    rounds: list[dict[str, Any]] = []
    try:
        with common.progress() as bar:
            task = bar.add_task("cpu_neighbour", total=ROUNDS * len(conditions))
            for r in range(ROUNDS):
                order = conditions if r % 2 == 0 else tuple(reversed(conditions))
                got = {}
                for kind in order:
                    with Neighbour(kind, there, opts.dsn):
                        got[kind] = gil_threads.measure(1, loops, seconds)  # its thread inherits the pin
                    bar.advance(task)
                rounds.append(got)
    finally:
        os.sched_setaffinity(0, before)
    loop = {kind: statistics.median(r[kind]["loop_us_mean"] for r in rounds) for kind in conditions}
    summary = {kind: {"loop_us_mean": us, "of_idle": common.ratio(us, loop["idle"])} for kind, us in loop.items()}
    return {"scenario": "cpu_neighbour", "loops_a_job": loops, "seconds_per_phase": seconds, "cpus": [here, there],
            "rounds": rounds, "summary": summary}
