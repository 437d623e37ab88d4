"""``python -m bench scheduling``: the policies with real worker processes, next to the simulator.

Two scenarios, each under greedy, strict and backfill, on a fleet of three
``taskqueue worker`` processes of capacities 15, 10 and 6:
- ``pfn``: seed 003's shape, compressed (one tick = ``TICK`` seconds), sizes
  1..10 so that every task fits two workers;
- ``starvation``: small low-priority tasks at 95% of the fleet's capacity and a
  task as large as the largest worker every 60 ticks.

A feeder enqueues each arrival at its tick with ``estimate`` = its run time;
handlers sleep the run time. Waits (started_at - created_at) and utilisation
(sum of required x run time over capacity x time) come from the database
afterwards. The simulator runs the very same arrivals, so the two tables can
be compared row by row. ``--seconds`` is the arrival window per policy
(default 60); the whole run takes about 2 x 3 x that.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from taskqueue.scheduling import POLICIES
from taskqueue.scheduling.report import summary
from taskqueue.scheduling.simulate import compare, starvation_bound
from taskqueue.scheduling.workload import Workload

from . import common
from .scheduling_app import QUEUE

TICK = 0.1  # seconds per simulator tick
CAPACITIES = (15, 10, 6)
ROOT = Path(__file__).resolve().parent.parent


def workloads(seconds: float) -> dict[str, Workload]:
    ticks = max(50, int(seconds / TICK))
    return {
        "pfn": Workload(capacities=CAPACITIES, sizes=(1, 10), ticks=ticks),
        "starvation": Workload.for_scenario("starvation", capacities=CAPACITIES, ticks=ticks),
    }


def _start_workers(
    dsn: str, schema: str, policy: str, capacities: tuple[int, ...] = CAPACITIES
) -> list[subprocess.Popen[bytes]]:
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    procs = []
    for capacity in capacities:
        cmd = [sys.executable, "-m", "taskqueue", "--dsn", dsn, "--schema", schema, "worker",
               "bench.scheduling_app:worker", "--capacity", str(capacity), "--policy", policy,
               "--log-level", "WARNING", "--no-migrate"]
        procs.append(subprocess.Popen(cmd, env=env, cwd=ROOT,
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
    return procs


def _wait_registered(tq: Any, n: int, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while len(tq.workers()) < n:
        if time.monotonic() > deadline:
            raise RuntimeError("the worker processes did not register")
        time.sleep(0.1)


def run_real(dsn: str, workload: Workload, policy: str) -> dict[str, Any]:
    """Feed the arrivals to a real fleet in real time; return waits per priority, utilisation, large waits."""
    schema = f"bench_sched_{policy}"
    tq = common.fresh_queue(dsn, schema)
    procs = _start_workers(dsn, schema, policy)
    try:
        _wait_registered(tq, len(CAPACITIES))
        arrivals = workload.generate()
        start = time.monotonic()
        i = 0
        while i < len(arrivals):
            tick = arrivals[i].arrival
            delay = start + tick * TICK - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            batch = []
            while i < len(arrivals) and arrivals[i].arrival == tick:
                a = arrivals[i]
                batch.append({"payload": {"seconds": a.runtime * TICK, "key": a.key}, "queue": QUEUE,
                              "priority": a.priority, "required": a.required, "estimate": a.estimate * TICK})
                i += 1
            tq.enqueue_many(batch)
        window = time.monotonic() - start
        deadline = time.monotonic() + max(60.0, window)
        while time.monotonic() < deadline and tq.stats().by_state["done"] < len(arrivals):
            time.sleep(0.5)
        return _measure(dsn, schema, workload, window)
    finally:
        _shut_down(procs, tq, dsn, schema)


def _measure(dsn: str, schema: str, workload: Workload, window: float) -> dict[str, Any]:
    import psycopg

    big = max(workload.capacities)
    with psycopg.connect(dsn, autocommit=True) as conn:
        rows = conn.execute(
            psycopg.sql.SQL(
                "SELECT priority, required, EXTRACT(EPOCH FROM COALESCE(started_at, now()) - created_at),"
                " EXTRACT(EPOCH FROM LEAST(finished_at, min_created + make_interval(secs => %s)) - started_at),"
                " started_at IS NULL"
                " FROM (SELECT t.*, min(created_at) OVER () AS min_created FROM {}.tasks t) s"
            ).format(psycopg.sql.Identifier(schema)),
            (window,),
        ).fetchall()
    waits: dict[int, list[float]] = {}
    unstarted: dict[int, int] = {}
    large: list[float] = []
    busy = 0.0
    for priority, required, wait, ran, pending in rows:
        waits.setdefault(priority, []).append(float(wait) / TICK)
        if pending:
            unstarted[priority] = unstarted.get(priority, 0) + 1
        if ran is not None and float(ran) > 0:
            busy += required * float(ran)
        if required == big and workload.scenario == "starvation":
            large.append(float(wait) / TICK)
    return {"waits": waits, "unstarted": unstarted, "utilisation": busy / (workload.total_capacity * window),
            "large_waits": large}


class _Measured:
    """Duck-types simulate.Result for report.summary."""

    def __init__(self, policy: str, data: dict[str, Any]) -> None:
        self.policy = policy
        self.waits = data["waits"]
        self.unstarted = data["unstarted"]
        self.utilisation = data["utilisation"]
        self.large_waits = data["large_waits"]


def drain_cost(dsn: str, n: int, rounds: int = 2) -> dict[str, Any]:
    """Drain ``n`` no-op tasks (size 1) with two worker processes of capacity 50, greedy and backfill alternated.

    Every task fits, so the policy never holds anything back: what is measured
    is the cost of planning the rounds.
    """
    runs: dict[str, list[float]] = {"greedy": [], "backfill": []}
    for _ in range(rounds):
        for policy in runs:
            runs[policy].append(_drain_once(dsn, n, policy))
    best = {p: max(v) for p, v in runs.items()}
    ratio = common.ratio(best["backfill"], best["greedy"])
    return {"rows": n, "per_second": runs, "best": best, "backfill_vs_greedy": ratio}


def _drain_once(dsn: str, n: int, policy: str) -> float:
    schema = f"bench_sched_drain_{policy}"
    tq = common.fresh_queue(dsn, schema)
    for done in range(0, n, 10_000):
        tq.enqueue_many([{"payload": {"seconds": 0}, "queue": QUEUE, "required": 1}] * min(10_000, n - done))
    common.console.print(f"scheduling: drain {n} under {policy}")
    start = time.monotonic()
    procs = _start_workers(dsn, schema, policy, capacities=(50, 50))
    try:
        while tq.stats().by_state["done"] < n:
            time.sleep(0.02)
        return n / (time.monotonic() - start)
    finally:
        _shut_down(procs, tq, dsn, schema)


def run(opts: common.Options) -> dict[str, Any]:
    """``--only drain``: the drain cost alone; ``--only real``: the policy runs alone; default: both."""
    seconds = opts.seconds if opts.seconds is not None else 60.0
    out: dict[str, Any] = {"tick_seconds": TICK, "capacities": CAPACITIES, "seconds_per_policy": seconds}
    if opts.only in (None, "drain"):
        out["drain"] = drain_cost(opts.dsn, opts.rows or 20_000)
    if opts.only == "drain":
        return out
    for name, workload in workloads(seconds).items():
        sim = compare(workload)
        real = {}
        for policy in POLICIES:
            common.console.print(f"scheduling: {name} under {policy} for {seconds:g}s")
            real[policy] = _Measured(policy, run_real(opts.dsn, workload, policy))
        out[name] = {
            "simulated": summary(sim, workload.priorities),
            "real": summary(real, workload.priorities),  # type: ignore[arg-type]
        }
        if name == "starvation":
            out[name]["bound_ticks"] = starvation_bound(workload)
    return out


def _shut_down(procs: list[Any], tq: Any, dsn: str, schema: str) -> None:
    """Stop the worker processes, then drop what the cell made."""
    for p in procs:
        p.terminate()
    for p in procs:
        p.wait(timeout=30)
    tq.close()
    common.drop_schema(dsn, schema)
