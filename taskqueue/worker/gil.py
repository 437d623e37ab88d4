"""Notices when the sync handlers hold the GIL, so that a worker's handler threads only take turns at it.

Python threads run Python code one at a time. Handlers that compute in
Python keep the GIL between them, and more threads add no throughput. They
do add waiting: the claim loop, the completer and the heartbeat need the GIL
for every round trip, and wait their turn among the handler threads. With 1
ms CPU-bound handlers, a task enqueued for a busy worker started after 19 ms
with 2 threads, 25 ms with 8 and 66 ms with the default 32, at the median
(see docs/performance.md, Drain). The inline lane (``Worker(inline=True)``, one
process per core) is the setting for handlers that mostly compute, and more
processes for handlers that also wait on I/O; this watch says so once per run.

The measure is the handlers' own CPU time (``time.thread_time`` around one
call in ``EVERY``, scaled up), summed over a window, against the whole
process's CPU time in the same window. The GIL bounds the threads when the process is busy (it ran at
least half the window) and the handlers took most of what it ran (80%): the
other threads then wait their turn among them. Judging by the process's own
CPU, not by a full core, keeps the verdict on a host whose other processes
leave this one less than a core. Handlers that used well over one core
between them compute outside the GIL (in C code that releases it), where
threads do help, so no warning is given.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

log = logging.getLogger("taskqueue.worker")

#: The window the shares are measured over (seconds).
WINDOW_SECONDS = 10.0
#: The process ran at least this share of the window (of one core)...
MIN_BUSY = 0.5
#: ...and the handlers' own CPU was at least this share of what it ran...
MIN_OF_PROCESS = 0.8
#: ...and at most this many cores' worth: beyond it they compute outside the GIL.
MAX_CORES = 1.2
#: Fewer handler threads than this hardly wait for each other: no warning.
MIN_THREADS = 4
#: Timed handlers a window needs before its share is judged: with long handlers it lasts until this many
#: have returned, since a handler's CPU is counted when it returns.
MIN_SAMPLES = 16
#: One handler in this many is timed: two thread_time calls cost about 0.5 µs, which every one of a
#: no-op drain's 30,000 tasks a second would pay (counted; an A/B of drains could not resolve it).
EVERY = 8


class GilWatch:
    """Sums the sync handlers' CPU time, and warns once when the handler threads take turns at the GIL.

    Written by every handler thread without a lock: each update is a float
    store under the GIL, and a lost update only nudges the share.
    """

    def __init__(
        self,
        threads: int,
        *,
        worker: str,
        window: float | None = None,
        process_clock: Callable[[], float] = time.process_time,
        every: int = EVERY,
    ) -> None:
        self.threads = threads
        self.worker = worker
        self.window = WINDOW_SECONDS if window is None else window
        self.share: float | None = None  # the last window's: the handlers' CPU, in cores
        self.of_process: float | None = None  # ...and as a share of the process's CPU
        self.warned = False
        self.every = every
        self._count = 0
        self._clock = process_clock
        self._cpu = 0.0
        self._tasks = 0
        self._since = time.monotonic()
        self._process = process_clock()

    def timing(self) -> bool:
        """Whether to time the handler about to run: one in ``every``."""
        self._count += 1
        return self._count % self.every == 0

    def ran(self, cpu: float, now: float) -> None:
        """A timed handler returned after ``cpu`` seconds of its thread's CPU time; ``now`` is ``time.monotonic()``.

        It stands for the ``every`` handlers it was picked from.
        """
        self._cpu += cpu * self.every
        self._tasks += 1
        span = now - self._since
        if span < self.window or self._tasks < MIN_SAMPLES:
            return  # a window is at least this long and this many timed handlers: long handlers widen it
        process = self._clock()
        cpu_sum, ran = self._cpu, process - self._process
        self._cpu, self._tasks, self._since, self._process = 0.0, 0, now, process
        if ran <= 0:
            return
        self.share, self.of_process = cpu_sum / span, cpu_sum / ran
        if (not self.warned and self.threads >= MIN_THREADS and ran / span >= MIN_BUSY
                and self.of_process >= MIN_OF_PROCESS and self.share <= MAX_CORES):
            self.warned = True
            log.warning(
                "sync handlers took %.0f%% of this process's CPU over the last %.0f s: they hold the GIL, so the "
                "%d handler threads take turns at it, and claims and outcomes wait for it too (a task enqueued "
                "now waits longer to start). For handlers that mostly compute, run one worker process per core "
                "with inline=True (taskqueue worker --inline); for handlers that also wait on I/O, run more worker "
                "processes",
                100 * min(1.0, self.of_process), span, self.threads,
                extra={"worker": self.worker, "handler_cpu_share": round(self.share, 3),
                       "handler_share_of_process": round(self.of_process, 3), "threads": self.threads},
            )
