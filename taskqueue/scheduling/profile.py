"""Spare capacity over time, as a step function: seed 003's "Spare Point" sequence.

From the running tasks' expected ends, a worker knows how much of its capacity
will be free at each future moment. Reserving a waiting task subtracts its
rectangle (required x estimate) from that function; a task can be backfilled
now if its own rectangle fits under what is left.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable

#: A running task past its expected end is assumed to end just after now.
OVERDUE_END = 1e-6


class Profile:
    """Spare capacity from ``now`` on; ``spare[i]`` holds on ``[times[i], times[i + 1])``, the last one forever."""

    __slots__ = ("spare", "times")

    def __init__(self, now: float, capacity: int, running: Iterable[tuple[int, float]]) -> None:
        """``running`` is (required, expected end) of each running task."""
        releases: dict[float, int] = {}
        in_use = 0
        for required, end in running:
            in_use += required
            at = max(end, now + OVERDUE_END)
            releases[at] = releases.get(at, 0) + required
        self.times = [now]
        self.spare = [capacity - in_use]
        for at in sorted(releases):
            self.times.append(at)
            self.spare.append(self.spare[-1] + releases[at])

    @property
    def now(self) -> float:
        return self.times[0]

    def at(self, t: float) -> int:
        return self.spare[max(0, bisect.bisect_right(self.times, t) - 1)]

    def sequence(self, ticks: int, step: float = 1.0) -> list[int]:
        """Spare at now, now + step, ... (the seed's Spare Point sequence)."""
        return [self.at(self.now + k * step) for k in range(ticks)]

    def lowest(self, start: float, end: float) -> int:
        """The least spare capacity on ``[start, end)``."""
        i = max(0, bisect.bisect_right(self.times, start) - 1)
        low = self.spare[i]
        for j in range(i + 1, len(self.times)):
            if self.times[j] >= end:
                break
            low = min(low, self.spare[j])
        return low

    def floor(self, start: float) -> int:
        """The least spare capacity from ``start`` on, forever: what a task of any length may use."""
        i = max(0, bisect.bisect_right(self.times, start) - 1)
        return min(self.spare[i:])

    def fits(self, required: int, start: float, duration: float) -> bool:
        return required <= self.lowest(start, start + duration)

    def earliest(self, required: int, duration: float) -> float | None:
        """The first time the task fits for its whole duration; None if it never does.

        Spare capacity only rises at a breakpoint, so the answer is one of them.
        """
        for t in self.times:
            if self.fits(required, t, duration):
                return t
        return None

    def take(self, required: int, start: float, duration: float) -> None:
        """Subtract the rectangle ``required`` x ``[start, start + duration)``."""
        end = start + duration
        self._cut(start)
        self._cut(end)
        i = bisect.bisect_left(self.times, start)
        while i < len(self.times) and self.times[i] < end:
            self.spare[i] -= required
            i += 1

    def _cut(self, t: float) -> None:
        i = bisect.bisect_right(self.times, t) - 1
        if i >= 0 and self.times[i] == t:
            return
        if i < 0:  # before now: nothing to split
            return
        self.times.insert(i + 1, t)
        self.spare.insert(i + 1, self.spare[i])
