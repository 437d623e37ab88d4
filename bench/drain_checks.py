"""The drain benchmark's side measurements: start latency on one default worker, and enqueue against PGQueuer."""

from __future__ import annotations

import os
import statistics
import tempfile
import time
from typing import Any

from . import common
from .drain_sides import SCHEMA, Cell, Ours, Pgq, Workers

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
