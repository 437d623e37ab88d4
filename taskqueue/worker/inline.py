"""The inline lane: sync handlers run on the claim loop's own thread, a batch at a time.

A worker of handler threads hands every task over twice (claimer, handler
thread, completer). With handlers that hold the GIL, each hand-off waits for
the interpreter to switch threads: with 1 ms CPU-bound handlers on two
processes, the threads left about a tenth of the two cores idle (see
docs/performance.md, Drain). With ``Worker(inline=True)`` the claim loop runs
the handlers itself, one at a time in claim order, and writes their outcomes
in one transaction at the end of the batch. A batch is about
``INLINE_BATCH_SECONDS`` of handler time (:meth:`Pace.batch
<taskqueue.worker.pace.Pace.batch>`), so a task enqueued meanwhile waits
about that long for the next claim, unless a NOTIFY announces it: then the
claimer makes a short round between two handlers (at most every 10 ms), and
what it claims joins the batch in claim order. For CPU-bound handlers, run
one such worker process per core.

Nothing else changes: the same capacity entries (heartbeated until each
handler returns), the same outcome rules, the same write as the completer's.
An outcome that frees a pool slot is written at once, since another worker
may be waiting for that slot; so is a batch whose oldest outcome has waited
``FLUSH_SECONDS`` (a quarter of the lease, if shorter). At a stop the handler in hand
finishes; the claims not begun go back to the queue at once, without using up
an attempt.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import time
from collections.abc import Callable

from ..queue import TaskQueue
from ..task import Task
from .capacity import Capacity
from .completer import MAX_BATCH, Completer
from .executor import Outcomes
from .outcome import Report
from .shutdown import give_back

log = logging.getLogger("taskqueue.worker.inline")

#: The longest an outcome waits for the rest of its batch before the batch so far is written.
FLUSH_SECONDS = 0.2


class InlineLane:
    """Runs the claimed sync tasks on the calling thread (the claimer's) and records their outcomes in batches."""

    def __init__(
        self,
        tq: TaskQueue,
        outcomes: Outcomes,
        completer: Completer,
        capacity: Capacity,
        *,
        worker: str,
        lease: float,
    ) -> None:
        self.tq = tq
        self.flush_seconds = min(FLUSH_SECONDS, lease / 4)  # outcomes in flight are not heartbeated
        self.outcomes = outcomes
        self.completer = completer
        self.capacity = capacity
        self.worker = worker
        self._batch: list[tuple[int, int, int, Task]] = []  # claim order: (priority, id), then arrival
        self._seq = itertools.count()

    def submit(self, task: Task) -> None:
        """Take a claimed task into the next batch (the claimer's ``submit`` for sync queues)."""
        heapq.heappush(self._batch, (task.priority, task.id, next(self._seq), task))

    def run_batch(self, stopping: Callable[[], bool], between: Callable[[], None] | None = None) -> None:
        """Run what was submitted, best first; once ``stopping()`` says so, give the rest back instead.

        ``between`` runs before each handler but the first: the claimer's look for urgent work, whose
        tasks it submits here.
        """
        pending: list[Report] = []
        oldest = 0.0
        first = True
        try:
            while self._batch:
                if stopping():
                    self._give_back_rest()
                    return
                if between is not None and not first:
                    between()
                first = False
                task = heapq.heappop(self._batch)[-1]
                report = self.outcomes.run(task)
                if report is None:  # no longer ours (lease lost): nothing to write
                    self.capacity.remove(task)
                    continue
                now = time.monotonic()
                if not pending:
                    oldest = now
                pending.append(report)
                if task.pool is not None or now - oldest >= self.flush_seconds or len(pending) >= MAX_BATCH:
                    self.completer.record(pending)
                    pending = []
        finally:
            if pending:
                self.completer.record(pending)

    def _give_back_rest(self) -> None:
        """At a stop: the claims whose handler never began go back to the queue, an attempt not used up."""
        tasks = [entry[-1] for entry in sorted(self._batch)]
        self._batch.clear()
        fields = {"worker": self.worker}
        released = self.capacity.release_unbegun(tasks)
        back = sum(give_back(self.tq, task, fields, why="claimed but not begun when the worker stopped",
                             level=logging.DEBUG) for task in released)
        self.capacity.remove_all(tasks)
        if back:
            log.info("%d claims not begun given back to the queue", back, extra={**fields, "outcome": "released"})
