"""Synthetic arrival streams for the simulator and the scheduling benchmark.

``pfn`` is seed 003's shape: one machine of capacity 15, two priorities, task
sizes 1..15, run times of several ticks, arrivals that keep it about 90% busy.
``starvation`` is the case greedy cannot handle: a stream of small
low-priority tasks keeps every worker at least 90% busy while a large
high-priority task arrives now and then.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

SCENARIOS = ("pfn", "starvation")

#: What each scenario changes from the defaults: starvation's small tasks are
#: 1..3 wide and run 1..8 ticks, arriving at 95% of the fleet's capacity.
SCENARIO_DEFAULTS: dict[str, dict[str, object]] = {
    "pfn": {},
    "starvation": {"sizes": (1, 3), "runtimes": (1, 8), "load": 0.95},
}


@dataclass(frozen=True, slots=True)
class Arrival:
    key: int
    arrival: int  # tick
    priority: int  # lower runs first, as in the database
    required: int
    runtime: int  # ticks it really runs
    estimate: float  # what the scheduler is told


@dataclass(frozen=True)
class Workload:
    """Parameters of a stream; ``generate`` makes the tasks, reproducibly from ``seed``."""

    scenario: str = "pfn"
    capacities: tuple[int, ...] = (15,)
    priorities: int = 2
    sizes: tuple[int, int] = (1, 15)
    runtimes: tuple[int, int] = (2, 6)
    load: float = 0.9
    high_share: float = 0.8  # two priorities: the share of priority 0 (more priorities: uniform)
    ticks: int = 4000
    estimate_error: float = 0.0  # estimates are runtime x uniform(1 - e, 1 + e)
    large_every: int = 60  # starvation: ticks between large tasks
    large_runtime: int = 4
    seed: int = 1

    def __post_init__(self) -> None:
        if self.scenario not in SCENARIOS:
            raise ValueError(f"scenario must be one of {', '.join(SCENARIOS)}")
        if not self.capacities or min(self.capacities) < 1:
            raise ValueError("every worker needs a capacity of at least 1")
        if not 1 <= self.priorities <= 101:
            raise ValueError("priorities must be 1..101 (the seed's 0..100)")
        lo, hi = self.sizes
        if not 1 <= lo <= hi <= max(self.capacities):
            raise ValueError("sizes must be 1 <= low <= high <= the largest capacity")
        if not 1 <= self.runtimes[0] <= self.runtimes[1]:
            raise ValueError("runtimes must be 1 <= low <= high ticks")
        if not 0.0 < self.load <= 2.0:
            raise ValueError("load must be in (0, 2]")
        if not 0.0 <= self.high_share <= 1.0:
            raise ValueError("high_share must be in [0, 1]")
        if self.ticks < 1 or not 0.0 <= self.estimate_error < 1.0:
            raise ValueError("ticks must be >= 1 and estimate_error in [0, 1)")

    @classmethod
    def for_scenario(cls, scenario: str, **settings: object) -> Workload:
        """The scenario's defaults, overridden by the settings that are not None."""
        if scenario not in SCENARIOS:
            raise ValueError(f"scenario must be one of {', '.join(SCENARIOS)}")
        chosen = {**SCENARIO_DEFAULTS[scenario], **{k: v for k, v in settings.items() if v is not None}}
        return cls(scenario=scenario, **chosen)  # type: ignore[arg-type]

    @property
    def total_capacity(self) -> int:
        return sum(self.capacities)

    def generate(self) -> list[Arrival]:
        rnd = random.Random(self.seed)
        if self.scenario == "starvation":
            return self._starvation(rnd)
        return self._pfn(rnd)

    def _estimate(self, rnd: random.Random, runtime: int) -> float:
        if not self.estimate_error:
            return float(runtime)
        return runtime * rnd.uniform(1.0 - self.estimate_error, 1.0 + self.estimate_error)

    def _priority(self, rnd: random.Random) -> int:
        if self.priorities == 2:
            return 0 if rnd.random() < self.high_share else 1
        return rnd.randrange(self.priorities)

    def _poisson_stream(self, rnd: random.Random, rate: float, make: object) -> list[Arrival]:
        out: list[Arrival] = []
        for tick in range(self.ticks):
            for _ in range(_poisson(rnd, rate)):
                out.append(make(len(out), tick))  # type: ignore[operator]
        return out

    def _pfn(self, rnd: random.Random) -> list[Arrival]:
        lo, hi = self.sizes
        rlo, rhi = self.runtimes
        work = (lo + hi) / 2 * (rlo + rhi) / 2
        rate = self.load * self.total_capacity / work

        def make(key: int, tick: int) -> Arrival:
            runtime = rnd.randint(rlo, rhi)
            return Arrival(key, tick, self._priority(rnd), rnd.randint(lo, hi), runtime, self._estimate(rnd, runtime))

        return self._poisson_stream(rnd, rate, make)

    def _starvation(self, rnd: random.Random) -> list[Arrival]:
        """Small low-priority tasks at ``load``; every ``large_every`` ticks a task as large as the largest worker."""
        lo, hi = self.sizes
        rlo, rhi = self.runtimes
        big = max(self.capacities)
        work = (lo + hi) / 2 * (rlo + rhi) / 2
        rate = self.load * self.total_capacity / work
        low = self.priorities - 1
        arrivals: list[Arrival] = []
        for tick in range(self.ticks):
            if tick and tick % self.large_every == 0:
                arrivals.append(Arrival(len(arrivals), tick, 0, big, self.large_runtime, float(self.large_runtime)))
            for _ in range(_poisson(rnd, rate)):
                runtime = rnd.randint(rlo, rhi)
                arrivals.append(
                    Arrival(len(arrivals), tick, low, rnd.randint(lo, hi), runtime, self._estimate(rnd, runtime))
                )
        return arrivals


def _poisson(rnd: random.Random, rate: float) -> int:
    # Knuth's method: rates here are a few per tick at most.
    limit, k, p = math.exp(-rate), 0, 1.0
    while True:
        p *= rnd.random()
        if p <= limit:
            return k
        k += 1
