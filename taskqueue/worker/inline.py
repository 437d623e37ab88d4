"""The inline lane: handlers run on the claim loop's own thread, a batch at a time.

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

Async handlers (under ``Worker.run``) run on an event loop of this same
thread, not on a loop thread of their own: the coroutines at the head of the
batch start together, at most ``async_concurrency`` of them, and the loop runs
until they have all ended; their outcomes are written from the loop, with no
thread in between. The claim and the write block the loop while they wait for
the database, so this suits CPU-bound coroutines; coroutines that mostly
await are better served by the worker's own loop thread (the default).

Nothing else changes: the same capacity entries (heartbeated until each
handler returns), the same outcome rules, the same write as the completer's.
An outcome that frees a pool slot is written at once, since another worker
may be waiting for that slot; so is a batch whose oldest outcome has waited
``FLUSH_SECONDS`` (a quarter of the lease, if shorter). At a stop the handlers
in hand finish; the claims not begun go back to the queue at once, without
using up an attempt.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import logging
import time
from collections.abc import Callable

from ..queue import TaskQueue
from ..task import Task
from .aio import AsyncHandlers
from .capacity import Capacity
from .completer import MAX_BATCH, Completer
from .executor import Outcomes
from .outcome import Report
from .shutdown import give_back

log = logging.getLogger("taskqueue.worker.inline")

#: The longest an outcome waits for the rest of its batch before the batch so far is written.
FLUSH_SECONDS = 0.2


class InlineLane:
    """Runs the claimed tasks on the calling thread (the claimer's) and records their outcomes in batches.

    ``async_queues``: the queues whose ``async def`` handlers run here too, on the lane's own event loop.
    """

    def __init__(
        self,
        tq: TaskQueue,
        outcomes: Outcomes,
        completer: Completer,
        capacity: Capacity,
        *,
        worker: str,
        lease: float,
        async_queues: frozenset[str] = frozenset(),
    ) -> None:
        self.tq = tq
        self.flush_seconds = min(FLUSH_SECONDS, lease / 4)  # outcomes in flight are not heartbeated
        self.outcomes = outcomes
        self.completer = completer
        self.capacity = capacity
        self.worker = worker
        self.async_queues = async_queues
        self.loop: asyncio.AbstractEventLoop | None = None
        self.async_handlers: AsyncHandlers | None = None
        if async_queues:
            self.loop = asyncio.new_event_loop()
            self.async_handlers = AsyncHandlers(outcomes, deliver=self.deliver)
            self.async_handlers.attach(self.loop)
        self._batch: list[tuple[int, int, int, Task]] = []  # claim order: (priority, id), then arrival
        self._seq = itertools.count()
        self._pending: list[Report] = []
        self._oldest = 0.0

    def submit(self, task: Task) -> None:
        """Take a claimed task into the next batch (the claimer's ``submit`` for the lane's queues)."""
        heapq.heappush(self._batch, (task.priority, task.id, next(self._seq), task))

    def run_batch(self, stopping: Callable[[], bool], between: Callable[[], None] | None = None) -> None:
        """Run what was submitted, best first; once ``stopping()`` says so, give the rest back instead.

        ``between`` runs before each sync handler but the first, and after each coroutine that ends:
        the claimer's look for urgent work, whose tasks it submits here.
        """
        first = True
        try:
            while self._batch:
                if stopping():
                    self._give_back_rest()
                    return
                if between is not None and not first:
                    between()
                first = False
                if self._batch[0][-1].queue in self.async_queues:
                    self._run_group(stopping, between)
                    continue
                task = heapq.heappop(self._batch)[-1]
                self.deliver(task, self.outcomes.run(task))
        finally:
            self._flush()

    def deliver(self, task: Task, report: Report | None) -> None:
        """Keep an outcome for the batch's write (None: the claim is no longer ours, nothing to write)."""
        if report is None:
            self.capacity.remove(task)
            return
        now = time.monotonic()
        if not self._pending:
            self._oldest = now
        self._pending.append(report)
        if task.pool is not None or now - self._oldest >= self.flush_seconds or len(self._pending) >= MAX_BATCH:
            self._flush()

    def close(self) -> None:
        """Close the lane's event loop, once the claimer's thread has left it."""
        loop = self.loop
        if loop is None or loop.is_closed() or loop.is_running():
            return
        loop.run_until_complete(loop.shutdown_asyncgens())
        loop.close()

    def _flush(self) -> None:
        if self._pending:
            pending, self._pending = self._pending, []
            self.completer.record(pending)

    def _run_group(self, stopping: Callable[[], bool], between: Callable[[], None] | None) -> None:
        """Start the coroutines at the head of the batch together; run the loop until every one has ended.

        An urgent coroutine claimed meanwhile (``between``, after each one that ends) joins the group.
        """
        loop, handlers = self.loop, self.async_handlers
        assert loop is not None and handlers is not None
        ended = loop.create_future()
        left = 0

        def start_head() -> None:
            nonlocal left
            while self._batch and self._batch[0][-1].queue in self.async_queues and not stopping():
                running = handlers.start(heapq.heappop(self._batch)[-1])
                left += 1
                running.add_done_callback(one_ended)

        def one_ended(_: asyncio.Task[None]) -> None:
            nonlocal left
            left -= 1
            try:
                if between is not None and not stopping():
                    between()
                    start_head()
            finally:
                if left == 0 and not ended.done():
                    ended.set_result(None)

        start_head()
        if left:
            loop.run_until_complete(ended)

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
