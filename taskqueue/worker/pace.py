"""How far ahead of its handler threads a worker claims: about one claim round trip's worth of work.

A claim takes a round trip and a commit. Claiming only what the threads can
start now leaves them idle for that long after every batch: with handlers of
50 µs and a 5 ms claim, ten threads would wait most of the time. So the
claimer also asks for the tasks the worker will finish during one claim:
claim time / time between two finished handlers, both measured as the worker
runs. Slow handlers make that nearly zero: a worker running minute-long tasks
claims no more than it has threads for and leaves the rest to other workers;
and a task claimed ahead waits about one claim round trip for its thread.

The gap is measured at the pace the worker runs now, which is itself held
back by how far ahead it claims: with 1 ms handlers and a 2 ms claim, ten
threads settled at a third of what they could do. So the gap the threads
would reach if never kept waiting (handler time / threads) counts too, and
the smaller of the two gaps decides.
Claims waiting for a thread hold their lease like running ones (the
heartbeat covers them) and count against ``capacity`` as claims do.

Claims come in batches, not one task at a time. Every freed thread wakes
the claimer, and a claim that only refills what was freed since the last
one brings a few tasks for a whole round trip and commit: with 1 ms handlers
on two busy processes, claims of about 8 tasks cost 125 µs of server CPU a
task, out of the handlers' share of two cores. So the worker holds
``ROUND_TRIPS_AHEAD`` round trips' worth of claims, and the claimer skips a
round while what already waits for a handler lasts longer than one round
trip (:meth:`Pace.runway`, at most a third of the claim-ahead limit); the
claim that follows brings about two round trips' worth. A claim put off is
not forgotten: the worker wakes the claimer as soon as the claims waiting
drop to that runway (:meth:`Capacity.put_off
<taskqueue.worker.capacity.Capacity.put_off>`), whether a handler finished
or a thread merely took one up. Async handlers are not claimed ahead, but
the same rule spaces their claims: a loop running CPU-bound coroutines has
hundreds waiting their turn.
"""

from __future__ import annotations

import time

#: At most this many claims ahead per handler thread, and in all (the default of ``claim_ahead``).
#: A cap, not a target: claims ahead wait for a thread, and a more urgent task enqueued meanwhile
#: waits for the next claim round, whose length grows with its batch. 100 keeps a busy worker's
#: start latency within its targets; a drain of cheap handlers goes faster with more (see
#: docs/performance.md, Drain).
AHEAD_PER_THREAD = 20
MAX_AHEAD = 100
#: Claims held ahead of the threads, in claim round trips' worth of handler work.
ROUND_TRIPS_AHEAD = 3
#: An inline lane (see inline.py) claims about this much handler time at once: one claim and about one
#: commit of outcomes per batch, and a task enqueued meanwhile waits about this long for the next claim.
INLINE_BATCH_SECONDS = 0.1
#: Weight of the newest measurement in the moving averages.
WEIGHT = 0.1
#: Gaps between finished handlers are counted between these bounds (an idle hour is not a rate).
MIN_GAP = 1e-6
MAX_GAP = 1.0


class Pace:
    """Moving averages of the claim round trip and of the gap between finished handlers.

    Written by several threads without a lock: each update is a float store
    under the GIL, and a lost update only nudges an estimate.
    """

    def __init__(self, concurrency: int, limit: int | None = None) -> None:
        """``limit``: most claims held ahead (the Worker's ``claim_ahead``); default min(MAX_AHEAD, 20 per thread)."""
        self.concurrency = concurrency
        self.limit = min(MAX_AHEAD, AHEAD_PER_THREAD * concurrency) if limit is None else limit
        self.claim_seconds: float | None = None
        self.gap_seconds: float | None = None
        self.run_seconds: float | None = None
        self._last_finish: float | None = None

    def claimed(self, seconds: float) -> None:
        self.claim_seconds = _average(self.claim_seconds, seconds)

    def finished(self, now: float | None = None, ran: float | None = None) -> None:
        """A handler returned (any thread) after ``ran`` seconds; ``now`` is ``time.monotonic()`` unless given."""
        now = time.monotonic() if now is None else now
        last, self._last_finish = self._last_finish, now
        if last is not None:
            self.gap_seconds = _average(self.gap_seconds, min(MAX_GAP, max(MIN_GAP, now - last)))
        if ran is not None:
            self.run_seconds = _average(self.run_seconds, min(MAX_GAP, max(MIN_GAP, ran)))

    def ahead(self) -> int:
        """Claims worth holding beyond the threads: none until both times are known."""
        gap, claim = self._gap(), self.claim_seconds
        if gap is None or claim is None:
            return 0
        return min(self.limit, int(ROUND_TRIPS_AHEAD * claim / gap))

    def batch(self) -> int:
        """Tasks an inline lane claims at once: ``INLINE_BATCH_SECONDS`` of handler time, at most ``limit``.

        One until a handler's time is known: a lane of minute-long tasks never holds more than it runs.
        """
        ran = self.run_seconds
        if ran is None:
            return 1
        return max(1, min(self.limit, int(INLINE_BATCH_SECONDS / ran)))

    def runway(self) -> int | None:
        """How many claims waiting for a handler keep the handlers busy for one claim round trip (None: unknown)."""
        gap, claim = self._gap(), self.claim_seconds
        if gap is None or claim is None:
            return None
        return int(claim / gap)

    def _gap(self) -> float | None:
        """The time between two finished handlers, or what it would be if no thread ever waited for a claim."""
        gap = self.gap_seconds
        if gap is not None and self.run_seconds is not None:
            gap = min(gap, max(MIN_GAP, self.run_seconds / self.concurrency))
        return gap


def _average(old: float | None, new: float) -> float:
    return new if old is None else old + WEIGHT * (new - old)
