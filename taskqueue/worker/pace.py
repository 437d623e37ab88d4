"""How far ahead of its handler threads a worker claims: enough to cover one claim round trip.

A claim takes a round trip and a commit. Claiming only what the threads can
start now leaves them idle for that long after every batch: with handlers of
50 µs and a 5 ms claim, ten threads would wait 99% of the time. So the
claimer asks for as many more tasks as the threads will finish during one
claim (threads × claim time / handler time), measured as the worker runs.
Slow handlers make that nearly zero: a worker running minute-long tasks
claims no more than it has threads for, and leaves the rest to other
workers. Claims waiting for a thread hold their lease like running ones (the
heartbeat covers them) and count against ``capacity`` as claims do.
"""

from __future__ import annotations

#: At most this many claims ahead per handler thread, and in all.
AHEAD_PER_THREAD = 20
MAX_AHEAD = 500
#: Weight of the newest measurement in the moving averages.
WEIGHT = 0.2
#: Handler times below this count as this (a no-op would otherwise ask for everything).
MIN_HANDLER_SECONDS = 1e-5


class Pace:
    """Moving averages of handler run time and claim round trip; thread-safe enough (floats, GIL)."""

    def __init__(self, concurrency: int) -> None:
        self.limit = min(MAX_AHEAD, AHEAD_PER_THREAD * concurrency)
        self.concurrency = concurrency
        self.handler_seconds: float | None = None
        self.claim_seconds: float | None = None

    def handler_ran(self, seconds: float) -> None:
        self.handler_seconds = _average(self.handler_seconds, seconds)

    def claimed(self, seconds: float) -> None:
        self.claim_seconds = _average(self.claim_seconds, seconds)

    def ahead(self) -> int:
        """Claims worth holding beyond the threads: none until both times are known."""
        handler, claim = self.handler_seconds, self.claim_seconds
        if handler is None or claim is None:
            return 0
        return min(self.limit, int(self.concurrency * claim / max(handler, MIN_HANDLER_SECONDS)))


def _average(old: float | None, new: float) -> float:
    return new if old is None else old + WEIGHT * (new - old)
