"""The claim loop: fill the free budgets in one round trip, then sleep until something could change.

It sleeps on one event. Anything that could make a claim succeed sets it: a
NOTIFY (enqueue, a freed pool slot, a rescue), a local outcome recorded, a
lost lease, a stop request. Otherwise it sleeps exactly until the earliest
scheduled run_at, or ``poll_interval`` as a fallback.

Short rounds: a round claims the free budget plus the claim-ahead, which
takes a while (about 10 ms for 130 tasks), and a task enqueued meanwhile
waits for the end of that round and all of the next. So when a NOTIFY came
during a large round, the next round asks for at most ``SHORT_ROUND`` tasks:
an urgent task (a better priority) starts after a short claim instead of a
large one, and the round after is large again. Wake-ups from freed threads
do not count: they come all the time in a drain.

With ``Worker(inline=True)`` the round's sync tasks run on this thread
before the next round (``after_round``, see :mod:`taskqueue.worker.inline`);
a NOTIFY meanwhile gets a short round between two of them (``claim_between``).

With async handlers (``async_queues``), a round is two claims, one per kind
of handler, each bounded by its own budget (free threads, free async slots)
and by the capacity left after the other; they take turns going first, so
neither kind can starve the other of capacity.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from ..queue import TaskQueue
from ..scheduling.planner import Planner
from ..task import Task
from .capacity import ASYNC, SYNC, Capacity, Kind
from .service import Service, WorkerSignals

log = logging.getLogger("taskqueue.worker.claimer")

RUN_AT_SLACK = 0.005  # wake just after run_at, not just before
ERROR_BACKOFF_MAX = 5.0
SHORT_ROUND = 8  # most tasks asked for by the round after a NOTIFY came during a larger one
#: An inline batch looks for urgent work between two handlers at most this often, and only after a NOTIFY.
BETWEEN_SECONDS = 0.01


class Claimer(Service):
    """Claims what fits the free budgets and hands the tasks to ``submit``."""

    def __init__(
        self,
        tq: TaskQueue,
        capacity: Capacity,
        *,
        queues: list[str],
        worker: str,
        lease: float,
        poll_interval: float,
        wake: threading.Event,
        submit: Callable[[Task], None],
        listening: threading.Event,
        ready: threading.Event,
        halt: threading.Event,
        signals: WorkerSignals | None = None,
        planner: Planner | None = None,
        async_queues: list[str] | None = None,
        notified: threading.Event | None = None,
        after_round: Callable[[], None] | None = None,
    ) -> None:
        super().__init__("claimer", worker=worker, signals=signals)
        self.tq = tq
        self.planner = planner  # None: greedy (fill the free capacity)
        self.capacity = capacity
        self.queues = queues
        aio = set(async_queues or ())
        kinds: list[tuple[Kind, list[str]]] = [(SYNC, [q for q in queues if q not in aio]), (ASYNC, sorted(aio))]
        self.kinds = [(kind, names) for kind, names in kinds if names]
        self._rounds = 0
        self.lease = lease
        self.poll_interval = poll_interval
        self.wake = wake
        self.submit = submit
        self.listening = listening
        self.ready = ready
        self.halt = halt  # the worker's stop request: no claim after it, not even a first one
        self.notified = notified or threading.Event()  # set by the listener on each NOTIFY
        self.after_round = after_round  # an inline lane runs the round's sync tasks here (inline.py)
        self._between_at = float("-inf")

    def next_cap(self, asked: int) -> int | None:
        """The cap on the next round: short after a large round during which a NOTIFY came."""
        return SHORT_ROUND if asked > SHORT_ROUND and self.notified.is_set() else None

    def claim(self, cap: int | None = None, *, notified: bool = False) -> tuple[list[Task], int, bool]:
        """Claim what fits now, per kind of handler: (tasks, how many were asked for, whether a kind got all).

        Nothing is asked (0) when no thread or async slot is free, or while
        the claims waiting for a handler outlast a claim round trip, unless a
        NOTIFY came since the last round (``notified``): it may announce an
        urgent task. ``cap`` bounds what each kind asks for.
        """
        kinds = self.kinds if self._rounds % 2 == 0 else self.kinds[::-1]
        self._rounds += 1
        tasks: list[Task] = []
        asked, full = 0, False
        for kind, queues in kinds:
            got, wanted = self._claim(kind, queues, cap, notified)
            tasks += got
            asked += wanted
            full = full or (wanted > 0 and len(got) == wanted)
        return tasks, asked, full

    def _claim(self, kind: Kind, queues: list[str], cap: int | None, notified: bool) -> tuple[list[Task], int]:
        available, threads = self.capacity.free(kind)
        if cap is not None:
            threads = min(threads, cap)
        if threads <= 0 or (not notified and self.capacity.put_off(kind)):
            return [], 0  # nothing free, or enough waits for a handler: claim later, in a larger batch
        if self.planner is not None and available is not None:
            # The policy only ever lowers the budget: the claim stays the exact-fit claim.
            available = self.planner.budget(self.capacity.running, available)
        started = time.monotonic()
        tasks = self.tq.claim_many(
            available=available, limit=threads, queues=queues, worker=self.worker, lease=self.lease
        )
        now = time.monotonic()
        self.capacity.pace_of(kind).claimed(now - started)
        self.capacity.add_all(tasks, now, kind)
        return tasks, threads

    def claim_between(self) -> None:
        """Between two handlers of an inline batch: a short round, if a NOTIFY came (it may be urgent work).

        What it claims joins the batch in claim order, so an urgent task runs
        next instead of after the batch (about 0.1 s of handlers). At most one
        such round every ``BETWEEN_SECONDS``: a steady stream of enqueues
        must not turn a batch into a claim per task. A failed round is logged
        and left to the next.
        """
        now = time.monotonic()
        if not self.notified.is_set() or now - self._between_at < BETWEEN_SECONDS:
            return
        self._between_at = now
        self.notified.clear()
        try:
            tasks, _, _ = self.claim(SHORT_ROUND, notified=True)
        except Exception as exc:
            log.warning("claim between handlers failed (%s); the next round will claim", exc,
                        extra={"worker": self.worker})
            return
        for task in tasks:
            self.submit(task)
        self.signals.claimed.signal(tasks)

    def interrupt(self) -> None:
        self.wake.set()

    def run(self) -> None:
        errors = 0
        cap: int | None = None
        while not self.stopping and not self.halt.is_set():
            # Clear before looking: a wake-up that arrives during the claim is kept.
            notified = self.notified.is_set()
            self.wake.clear()
            self.notified.clear()
            try:
                tasks, asked, full = self.claim(cap, notified=notified)
                cap = self.next_cap(asked) if asked else cap  # a round that asked nothing keeps the cap
                errors = 0
                for task in tasks:
                    self.submit(task)
                if not self.ready.is_set() and self.listening.is_set():
                    self.ready.set()
                self.signals.claimed.signal(tasks)
                if self.after_round is not None:
                    self.after_round()
                if full:
                    continue  # a full batch: there may be more right away
                timeout = self.poll_interval
                if asked:
                    next_run = self.tq.next_run_in()
                    if next_run is not None:
                        timeout = min(timeout, max(0.0, next_run) + RUN_AT_SLACK)
            except Exception as exc:
                errors += 1
                timeout = min(ERROR_BACKOFF_MAX, 0.1 * 2**errors, self.poll_interval)
                log.warning("claim round failed (%s); retrying in %.1f s", exc, timeout,
                            extra={"worker": self.worker})
            if self.stopping or self.halt.is_set():
                return
            self.wake.wait(timeout)
