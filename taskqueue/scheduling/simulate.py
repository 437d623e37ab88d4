"""A virtual-clock simulator of a fleet of workers, running the very plan function the workers run.

No database: the queue is a list in claim order ((priority, id)), and the
claim is :func:`~.policy.claim_order_pick`, the exact-fit walk the database
does. Each tick, finished tasks free their capacity, new tasks arrive, then
each worker plans and claims in turn (the order rotates each tick), records
its reservation where the others can see it, and starts what it claimed.

Waiting time is seed 003's: end - creation - run time, i.e. start - creation.
Tasks still waiting when the simulation stops count with their wait so far.
"""

from __future__ import annotations

import bisect
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from . import POLICIES
from .policy import Head, Reserved, plan
from .workload import Arrival, Workload

HEADS = 64  # waiting tasks a worker reads per round, as the real worker does


@dataclass
class _Worker:
    index: int
    capacity: int
    running: list[tuple[int, int, float, int]] = field(default_factory=list)  # (end, required, expected end, key)
    reservation: Reserved | None = None

    @property
    def in_use(self) -> int:
        return sum(r[1] for r in self.running)


@dataclass
class WaitStats:
    count: int
    mean: float
    p95: float
    max: float
    unstarted: int

    @classmethod
    def of(cls, waits: Sequence[float], unstarted: int) -> WaitStats:
        if not waits:
            return cls(0, 0.0, 0.0, 0.0, unstarted)
        ordered = sorted(waits)
        p95 = ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))]
        return cls(len(ordered), statistics.fmean(ordered), float(p95), float(ordered[-1]), unstarted)


@dataclass
class Result:
    policy: str
    waits: dict[int, list[int]]  # priority -> wait of each task (unstarted ones: wait so far)
    unstarted: dict[int, int]
    utilisation: float
    executing: list[list[int]]  # per worker, capacity in use at each tick of the arrival window
    large_waits: list[int]  # waits of the tasks as large as the largest worker (starvation scenario)

    def stats(self) -> dict[int, WaitStats]:
        return {p: WaitStats.of(w, self.unstarted.get(p, 0)) for p, w in sorted(self.waits.items())}


def simulate(workload: Workload, policy: str, *, depth: int = 1, arrivals: list[Arrival] | None = None) -> Result:
    """Run one policy over the workload's arrivals; arrivals keep coming for ``workload.ticks`` ticks."""
    if policy not in POLICIES:
        raise ValueError(f"unknown policy {policy!r}")
    stream = workload.generate() if arrivals is None else arrivals
    workers = [_Worker(i, c) for i, c in enumerate(workload.capacities)]
    big = max(workload.capacities)
    waiting: list[tuple[int, int]] = []  # (priority, key), the claim order
    tasks = {a.key: a for a in stream}
    reserved_by: dict[int, int] = {}
    waits: dict[int, list[int]] = {}
    large: list[int] = []
    executing: list[list[int]] = [[] for _ in workers]
    busy = 0
    nxt = 0
    t = 0
    horizon = 2 * workload.ticks
    while t < horizon and (t < workload.ticks or waiting or any(w.running for w in workers)):
        for w in workers:
            w.running = [r for r in w.running if r[0] > t]
        while nxt < len(stream) and stream[nxt].arrival <= t:
            bisect.insort(waiting, (stream[nxt].priority, stream[nxt].key))
            nxt += 1
        for k in range(len(workers)):
            w = workers[(t + k) % len(workers)]
            started = _round(w, t, waiting, tasks, reserved_by, policy, depth)
            for key in started:
                a = tasks[key]
                wait = t - a.arrival
                waits.setdefault(a.priority, []).append(wait)
                if a.required == big and workload.scenario == "starvation":
                    large.append(wait)
        if t < workload.ticks:
            for w in workers:
                executing[w.index].append(w.in_use)
                busy += w.in_use
        t += 1
    unstarted: dict[int, int] = {}
    for priority, key in waiting:
        waits.setdefault(priority, []).append(t - tasks[key].arrival)
        unstarted[priority] = unstarted.get(priority, 0) + 1
        if tasks[key].required == big and workload.scenario == "starvation":
            large.append(t - tasks[key].arrival)
    utilisation = busy / (workload.total_capacity * workload.ticks)
    return Result(policy, waits, unstarted, utilisation, executing, large)


def _round(
    w: _Worker,
    t: int,
    waiting: list[tuple[int, int]],
    tasks: dict[int, Arrival],
    reserved_by: dict[int, int],
    policy: str,
    depth: int,
) -> list[int]:
    """One worker's claim round: plan, claim with the plan's budget, record the reservation."""
    own = w.reservation
    heads = []
    for _, key in waiting[:HEADS]:
        a = tasks[key]
        holder = reserved_by.get(key)
        overdue = own is not None and own.key == key and t > own.start
        heads.append(Head(key, a.required, a.estimate, holder is not None and holder != w.index, overdue))
    running = [(r[1], r[2]) for r in w.running]
    chosen = plan(policy, w.capacity, float(t), running, heads, truncated=len(waiting) > HEADS, depth=depth)
    # The claim: the exact-fit walk over the whole queue with the plan's budget.
    budget = chosen.available
    started: list[int] = []
    i = 0
    while i < len(waiting) and budget > 0:
        key = waiting[i][1]
        a = tasks[key]
        if a.required <= budget:
            budget -= a.required
            del waiting[i]
            started.append(key)
            w.running.append((t + a.runtime, a.required, t + a.estimate, key))
            reserved_by.pop(key, None)
            continue
        i += 1
    if own is not None and reserved_by.get(own.key) == w.index:
        del reserved_by[own.key]
    w.reservation = chosen.reservation
    if w.reservation is not None and w.reservation.key not in reserved_by:
        reserved_by[w.reservation.key] = w.index
    return started


def compare(workload: Workload, policies: Sequence[str] = POLICIES, *, depth: int = 1) -> dict[str, Result]:
    """Every policy on the same arrivals."""
    stream = workload.generate()
    return {p: simulate(workload, p, depth=depth, arrivals=stream) for p in policies}


def starvation_bound(workload: Workload) -> float:
    """Longest wait a large task can have under strict or backfill with exact estimates, in ticks.

    When it arrives it is the first task in claim order that does not fit (it
    has the best priority, and large tasks arrive further apart than they
    run). Its reservation is at the latest expected end of the running tasks,
    at most the longest run time away, and nothing started after it may delay
    it; it starts in the claim round of that tick. So: longest run time + 1.
    """
    return float(workload.runtimes[1] + 1)


def starvation_series(
    base: Workload, lengths: Sequence[int], policies: Sequence[str] = POLICIES
) -> dict[str, list[float]]:
    """Max wait of the large tasks per policy, for runs of each length (greedy's grows with it)."""
    series: dict[str, list[float]] = {p: [] for p in policies}
    for ticks in lengths:
        results = compare(_with(base, ticks=ticks), policies)
        for p in policies:
            series[p].append(float(max(results[p].large_waits, default=0)))
    return series


def _with(workload: Workload, **changes: object) -> Workload:
    return replace(workload, **changes)  # type: ignore[arg-type]
