"""Where a drain cell's CPU went, read from Linux's /proc: the machine, the workers, the server.

A drain of CPU-bound handlers is bounded by the two cores, so a library can
lose to another by leaving them idle as surely as by spending more per job.
Around a cell's clock this reads the share of the machine that was busy, the
CPU time of the worker processes and of PostgreSQL's processes (when the
server runs on this machine), and the workers' voluntary context switches:
each one is a thread that blocked, on a lock, a condition, a socket or the
GIL. Elsewhere than Linux every figure is None.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from .common import TICK as _TICK
from .common import machine_jiffies as _machine


def _cpu_seconds(pid: int) -> float:
    """User + system CPU of a process (all its threads), 0 if it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / _TICK


def _voluntary_switches(pid: int) -> int:
    total = 0
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return 0
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/status") as f:
                for line in f:
                    if line.startswith("voluntary_ctxt_switches:"):
                        total += int(line.split()[1])
        except OSError:
            continue
    return total


def server_pids() -> list[int]:
    """The processes named postgres on this machine: the server's backends and helpers, and those of any
    other server running here (run none beside a benchmark)."""
    pids = []
    for name in os.listdir("/proc") if os.path.isdir("/proc") else ():
        if name.isdigit():
            try:
                with open(f"/proc/{name}/comm") as f:
                    if f.read().strip() == "postgres":
                        pids.append(int(name))
            except OSError:
                continue
    return pids


@dataclass
class Reading:
    machine: tuple[int, int] | None
    workers: float
    server: float
    switches: int


class CpuUse:
    """Read before and after a cell; :meth:`per_job` gives the figures."""

    def __init__(self, workers: list[int]) -> None:
        self.workers = workers
        self.server = server_pids()  # after the workers connected: their backends are in it

    def read(self) -> Reading:
        return Reading(
            _machine(),
            sum(_cpu_seconds(p) for p in self.workers),
            sum(_cpu_seconds(p) for p in self.server),
            sum(_voluntary_switches(p) for p in self.workers),
        )

    def per_job(self, before: Reading, after: Reading, jobs: int) -> dict[str, Any]:
        if before.machine is None or after.machine is None or jobs <= 0:
            return {"cores_busy": None, "worker_us_per_job": None, "server_us_per_job": None,
                    "worker_switches_per_job": None}
        total, idle = after.machine[0] - before.machine[0], after.machine[1] - before.machine[1]
        cores = os.cpu_count() or 1
        return {
            "cores_busy": round(cores * (1 - idle / total), 2) if total else None,
            "worker_us_per_job": round(1e6 * (after.workers - before.workers) / jobs, 1),
            "server_us_per_job": round(1e6 * (after.server - before.server) / jobs, 1) if self.server else None,
            "worker_switches_per_job": round((after.switches - before.switches) / jobs, 2),
        }
