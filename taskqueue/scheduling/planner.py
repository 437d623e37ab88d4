"""A worker's claim rounds under a scheduling policy: read the head of the queue, plan, record the reservation.

The claim itself stays the database's exact-fit claim. The planner only
chooses its budget, ``available``: for ``greedy`` the free capacity (no
reads), for ``strict`` and ``backfill`` the budget of :func:`~.policy.plan`
over the waiting heads (one read-only query per round). A budget never
exceeds the free capacity, so a claim still never returns a task that does
not fit, and held-back capacity is just capacity left unused: no pool slot is
taken for a reservation.

Run times: a task's own ``estimate`` when given at enqueue, else its queue's
learnt run time, else ``default_estimate``. Times here are the worker's
monotonic clock; the registry gets the expected start as now() + seconds.

Quiet rounds: when the last plan held nothing back and every task it saw
still fits the free capacity, the plan cannot differ from greedy until new
work arrives; the round then claims greedily without reading the queue. A
NOTIFY (new work, a rescue, a freed pool slot) calls :meth:`Planner.touch`,
and a plan is read at least every ``QUIET_SECONDS`` anyway (due scheduled
tasks send no NOTIFY). A quiet round still reads the one task at the head of
claim order (one index probe), so a large task enqueued at a better priority
is noticed in the first round after its commit, whether or not its NOTIFY has
arrived yet. This keeps a drain nearly as fast as greedy.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ..registry import Registry
from ..store.registry import WaitingHead
from .policy import Head, Plan, Reserved, plan

log = logging.getLogger("taskqueue.worker.scheduling")

HEADS = 64  # waiting tasks read per round: a plan looks this far down the queue
DEFAULT_ESTIMATE = 60.0  # seconds, for a queue that has finished nothing yet
OVERDUE_SLACK = 0.5  # seconds past its expected start before a reservation counts as overdue
QUIET_SECONDS = 1.0  # longest run of quiet rounds without reading the queue


@dataclass(frozen=True, slots=True)
class RunningTask:
    """A task this worker runs, as the plan needs it."""

    required: int
    started: float  # monotonic
    estimate: float | None
    queue: str


class Planner:
    """Chooses each claim round's budget for one worker."""

    def __init__(
        self,
        registry: Registry,
        *,
        policy: str,
        capacity: int,
        queues: Sequence[str] | None,
        descending: bool = False,
        heads: int = HEADS,
        default_estimate: float = DEFAULT_ESTIMATE,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.registry = registry
        self.policy = policy
        self.capacity = capacity
        self.queues = None if queues is None else list(queues)
        self.descending = descending
        self.heads = heads
        self.default_estimate = default_estimate
        self.clock = clock
        self.learnt: dict[str, float] = {}
        self.reserved: Reserved | None = None  # start on the monotonic clock, as first planned
        self.last: Plan | None = None
        self.rounds = 0  # plans read from the database (tests and benchmarks look)
        self._stale = True
        self._largest = 0  # largest required among the heads of the last quiet plan
        self._quiet_until = 0.0

    def touch(self) -> None:
        """Something new may wait (a NOTIFY): the next round reads the queue (thread-safe)."""
        self._stale = True

    def waking(self, wake: threading.Event) -> Callable[[], None]:
        """The listener's callback: a NOTIFY may mean a task the last plan did not see."""

        def notified() -> None:
            self.touch()
            wake.set()

        return notified

    def budget(self, running: Sequence[RunningTask] | Callable[[], Sequence[RunningTask]], free: int) -> int:
        """The ``available`` to claim with this round (at most ``free``).

        ``running`` may be a callable, called only when the round reads the queue.
        """
        if self.policy == "greedy" or free <= 0:
            return max(0, free)  # nothing free: no plan can start anything (the worker may still ask, to claim ahead)
        now = self.clock()
        quiet = not self._stale and self.reserved is None and self._largest <= free and now < self._quiet_until
        if quiet and self._head_fits(free):
            return free  # quiet: the plan would be greedy's
        self._stale = False
        rows = self.registry.waiting_heads(queues=self.queues, limit=self.heads, descending=self.descending)
        self.rounds += 1
        for row in rows:
            if row.learnt is not None:
                self.learnt[row.queue] = row.learnt
        tasks = running() if callable(running) else running
        view = [(r.required, r.started + self._estimate(r.estimate, r.queue)) for r in tasks]
        heads = [self._head(row, now) for row in rows]
        chosen = plan(self.policy, self.capacity, now, view, heads, truncated=len(rows) >= self.heads)
        self._record(chosen, rows, now)
        self.last = chosen
        budget = max(0, min(free, chosen.available))
        quiet = not chosen.reservations and not chosen.holding and budget >= free
        self._largest = max((r.required for r in rows), default=0) if quiet else self.capacity + 1
        self._quiet_until = now + QUIET_SECONDS
        return budget

    def _head_fits(self, free: int) -> bool:
        """The quiet round's one-row check: does the first task in claim order fit ``free``?

        A better task that does not fit (a large one enqueued at a better
        priority) becomes the head the moment it commits; reading the head
        catches it in the first round after, without waiting for the
        listener's NOTIFY, which a loaded machine can deliver rounds late.
        """
        rows = self.registry.waiting_heads(queues=self.queues, limit=1, descending=self.descending)
        return not rows or rows[0].required <= free

    def forget(self) -> None:
        """Drop the reservation (shutdown)."""
        if self.reserved is not None:
            self.reserved = None
            self.registry.clear()

    def _estimate(self, given: float | None, queue: str) -> float:
        if given is not None:
            return given
        return self.learnt.get(queue, self.default_estimate)

    def _head(self, row: WaitingHead, now: float) -> Head:
        own = self.reserved
        overdue = own is not None and own.key == row.id and now > own.start + OVERDUE_SLACK
        elsewhere = row.reserved_by is not None and row.reserved_by != self.registry.name
        estimate = row.estimate if row.estimate is not None else (row.learnt or self.default_estimate)
        return Head(row.id, row.required, estimate, elsewhere, overdue)

    def _record(self, chosen: Plan, rows: Sequence[WaitingHead], now: float) -> None:
        """Keep the registry's reservation in step with the plan; write only when the task changes."""
        new = chosen.reservation
        old = self.reserved
        if new is None:
            if old is not None:
                self.reserved = None
                self.registry.clear()
            return
        if old is not None and old.key == new.key:
            return  # same task: keep its first expected start, which is what "overdue" is measured from
        queue = next(r.queue for r in rows if r.id == new.key)
        if self.registry.reserve(task_id=new.key, required=new.required, queue=queue, start_in=new.start - now):
            self.reserved = new
            log.debug("holding back capacity for task %s (required %s), expected start in %.2fs",
                      new.key, new.required, new.start - now, extra={"worker": self.registry.name})
        else:
            self.reserved = None  # our registry row has expired; the next heartbeat brings it back
