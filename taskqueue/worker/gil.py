"""Notices when the sync handlers hold the GIL, so that a worker's handler threads only take turns at it.

Python threads run Python code one at a time. Handlers that compute in
Python keep the GIL between them, and more threads add no throughput. They
do add waiting: the claim loop, the completer and the heartbeat need the GIL
for every round trip, and wait their turn among the handler threads. With 1
ms CPU-bound handlers, a task enqueued for a busy worker started after 19 ms
with 2 threads, 25 ms with 8 and 66 ms with the default 32, at the median
(see docs/performance.md, Drain). The inline lane (``Worker(inline=True)``, one
process per core) is the setting for such handlers, and this watch says so
once per run.

The measure is the handlers' own CPU time (``time.thread_time`` around each
call), summed over a window and divided by its length: the share of one core
the handler threads used between them. Near 1 means the GIL is what bounds
them. Well above 1 means they compute outside the GIL (in C code that
releases it), where threads do help, so no warning is given.
"""

from __future__ import annotations

import logging
import time

log = logging.getLogger("taskqueue.worker")

#: The window the share is measured over (seconds).
WINDOW_SECONDS = 10.0
#: A share of one core between these bounds says the handlers hold the GIL.
HOLDING = (0.8, 1.2)
#: Fewer handler threads than this hardly wait for each other: no warning.
MIN_THREADS = 4
#: Tasks a window needs before its share is judged.
MIN_TASKS = 50


class GilWatch:
    """Sums the sync handlers' CPU time, and warns once when the handler threads take turns at the GIL.

    Written by every handler thread without a lock: each update is a float
    store under the GIL, and a lost update only nudges the share.
    """

    def __init__(self, threads: int, *, worker: str, window: float | None = None) -> None:
        self.threads = threads
        self.worker = worker
        self.window = WINDOW_SECONDS if window is None else window
        self.share: float | None = None  # the last window's share of one core, once one has ended
        self.warned = False
        self._cpu = 0.0
        self._tasks = 0
        self._since = time.monotonic()

    def ran(self, cpu: float, now: float) -> None:
        """A handler returned after ``cpu`` seconds of its thread's CPU time; ``now`` is ``time.monotonic()``."""
        self._cpu += cpu
        self._tasks += 1
        span = now - self._since
        if span < self.window:
            return
        cpu_sum, tasks = self._cpu, self._tasks
        self._cpu, self._tasks, self._since = 0.0, 0, now
        if tasks < MIN_TASKS:
            return
        self.share = cpu_sum / span
        if not self.warned and self.threads >= MIN_THREADS and HOLDING[0] <= self.share <= HOLDING[1]:
            self.warned = True
            log.warning(
                "sync handlers used %.0f%% of one core over the last %.0f s: they hold the GIL, so the %d handler "
                "threads take turns at it, and claims and outcomes wait for it too (a task enqueued now waits "
                "longer to start). For CPU-bound handlers, run one worker process per core with inline=True "
                "(taskqueue worker --inline)",
                100 * self.share, span, self.threads,
                extra={"worker": self.worker, "handler_cpu_share": round(self.share, 3), "threads": self.threads},
            )
