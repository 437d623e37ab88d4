"""Capacity accounting: the claims a worker holds, and what is left of its budgets.

The worker holds a set of running claims. Budgets limit it: the sum of
``required`` of the claims it still holds must stay within ``capacity``, the
number of busy handler threads within ``concurrency``, and the number of
running async handlers (coroutines on the worker's event loop) within
``async_concurrency``. Each claim is of one kind, ``SYNC`` or ``ASYNC``, by
its queue's handler; ``capacity`` is shared by both. A claim whose lease
was lost stops counting against capacity at once, but its thread stays busy
until the handler returns, because a Python thread cannot be killed.

A thread is free again as soon as its handler returns, while its claim still
counts against ``capacity`` until the outcome is committed: the next claim
round overlaps the commit of the last batch's outcomes instead of waiting
for it. A worker with cheap handlers also claims ahead of its threads (see
:mod:`~taskqueue.worker.pace`). Claims whose outcome is in flight are
bounded as well, so a slow database slows the claims down rather than piling
up finished work. Async handlers are not claimed ahead: a claim of that kind
never exceeds what the async budget can start now.
"""

from __future__ import annotations

import enum
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

from ..scheduling.planner import RunningTask
from ..task import Task
from .pace import MAX_AHEAD, ROUND_TRIPS_AHEAD, Pace

Kind = Literal["sync", "async"]
SYNC: Kind = "sync"
ASYNC: Kind = "async"


class Hold(enum.Enum):
    """Where a running claim is in its life on this worker."""

    RUNNING = "running"  # handler running; heartbeated
    FINISHING = "finishing"  # handler returned; complete/fail in flight
    LOST = "lost"  # lease lost; the result will be discarded
    RELEASED = "released"  # given back at shutdown; the result will be discarded


@dataclass(slots=True)
class Entry:
    task: Task
    hold: Hold = Hold.RUNNING
    counted: bool = True  # counts against capacity
    returned: bool = False  # the handler returned: its thread (or async slot) is free
    begun: bool = False  # its handler has begun (a thread or the event loop took it up)
    started: float = field(default=0.0)
    kind: Kind = SYNC


class Capacity:
    """The claims this worker holds, and what is left of its budgets. Thread-safe."""

    def __init__(
        self,
        capacity: int | None,
        concurrency: int,
        on_free: Callable[[], None],
        *,
        async_concurrency: int = 0,
        claim_ahead: int | None = None,
        inline: bool = False,
    ) -> None:
        self.capacity = capacity
        self.inline = inline  # sync handlers run on the claim loop's thread, a batch at a time (inline.py)
        self.concurrency = concurrency
        self.async_concurrency = async_concurrency
        self._on_free = on_free
        self._lock = threading.Lock()
        # Keyed by lease token, not task id: a task rescued from a lost lease
        # can be claimed again here while the old handler is still running.
        self._entries: dict[str, Entry] = {}
        self._in_use = 0
        self._busy: dict[Kind, int] = {SYNC: 0, ASYNC: 0}  # entries whose handler has not returned
        self._held: dict[Kind, int] = {SYNC: 0, ASYNC: 0}  # entries, by kind
        self._waiting: dict[Kind, int] = {SYNC: 0, ASYNC: 0}  # entries whose handler has not begun
        self._resume: dict[Kind, int | None] = {SYNC: None, ASYNC: None}  # a claim put off: wake at this many
        # Claim-ahead, for the handler threads only; an inline lane's batch is bounded by it, 100 by default.
        self.pace = Pace(concurrency, MAX_AHEAD if inline and claim_ahead is None else claim_ahead)
        self.async_pace = Pace(max(1, async_concurrency), 0)  # the async handlers' times; never ahead
        self._closing = False
        self.peak_in_use = 0
        self.peak_busy: dict[Kind, int] = {SYNC: 0, ASYNC: 0}

    # -- budgets ------------------------------------------------------------
    def free(self, kind: Kind = SYNC) -> tuple[int | None, int]:
        """(capacity available or None for unlimited, how many claims of ``kind`` to ask for).

        The second is, for SYNC, the free threads plus the claims worth holding
        ahead of them (inline: the lane's next batch); for ASYNC, the free async slots.
        """
        if kind == ASYNC:
            window = self.async_concurrency
        else:
            window = self.pace.batch() if self.inline else self.concurrency + self.pace.ahead()
        with self._lock:
            slots = min(window - self._busy[kind], 2 * window - self._held[kind])
            if self.capacity is None:
                return None, slots
            return max(0, self.capacity - self._in_use), slots

    def pace_of(self, kind: Kind) -> Pace:
        return self.pace if kind == SYNC else self.async_pace

    def finish_gap(self) -> float | None:
        """The time between two finished handlers of either kind, worker-wide (None: not measured yet)."""
        rate = sum(1.0 / gap for gap in (self.pace.gap_seconds, self.async_pace.gap_seconds) if gap)
        return 1.0 / rate if rate else None

    def waiting(self, kind: Kind = SYNC) -> int:
        """Claims of ``kind`` whose handler has not begun: queued for a thread, or for the event loop."""
        with self._lock:
            return self._waiting[kind]

    def put_off(self, kind: Kind = SYNC) -> bool:
        """Whether the next claim of ``kind`` can wait: what waits for a handler outlasts a claim round trip.

        The threads' runway is also at most a third of their claim-ahead
        limit, so a limit lower than a round trip's worth still leaves
        batches. When this says yes, the claimer is woken (``on_free``) as
        soon as the claims waiting drop to the runway, even if no handler
        finishes meanwhile: a thread that took the last waiting claim up
        may leave another idle.
        """
        if kind == SYNC and self.inline:
            return False  # the lane claims only between its batches, when nothing waits
        pace = self.pace_of(kind)
        runway = pace.runway()
        if runway is None:
            return False
        if kind == SYNC:
            runway = min(runway, pace.limit // ROUND_TRIPS_AHEAD)
        with self._lock:
            later = self._waiting[kind] > runway
            self._resume[kind] = runway if later else None
            return later

    @property
    def in_use(self) -> int:
        with self._lock:
            return self._in_use

    def busy(self) -> int:
        """Claims still held: handlers running (lost and released claims included) or outcomes in flight."""
        with self._lock:
            return len(self._entries)

    def threads_busy(self, kind: Kind = SYNC) -> int:
        """Handler threads (or, for ASYNC, async slots) busy: claims whose handler has not returned."""
        with self._lock:
            return self._busy[kind]

    @property
    def peak_threads(self) -> int:
        return self.peak_busy[SYNC]

    # -- life of a claim ----------------------------------------------------
    def add(self, task: Task, now: float, kind: Kind = SYNC) -> Entry:
        self.add_all([task], now, kind)
        return self._entries[_key(task)]

    def running(self) -> list[RunningTask]:
        """The claims that count against capacity, as a scheduling plan needs them."""
        with self._lock:
            return [
                RunningTask(e.task.required, e.started, e.task.estimate, e.task.queue)
                for e in self._entries.values()
                if e.counted
            ]

    def add_all(self, tasks: list[Task], now: float, kind: Kind = SYNC) -> None:
        """``add`` for a claimed batch, under one lock."""
        with self._lock:
            for task in tasks:
                self._entries[_key(task)] = Entry(task, started=now, kind=kind)
                self._in_use += task.required
            self._busy[kind] += len(tasks)
            self._held[kind] += len(tasks)
            self._waiting[kind] += len(tasks)
            self.peak_in_use = max(self.peak_in_use, self._in_use)
            self.peak_busy[kind] = max(self.peak_busy[kind], self._busy[kind])

    def holding(self) -> list[Task]:
        """Claims whose handler is still running: the ones to heartbeat."""
        with self._lock:
            return [e.task for e in self._entries.values() if e.hold is Hold.RUNNING]

    def unsettled(self) -> int:
        """Claims whose outcome is not recorded yet (handler running, or complete/fail in flight)."""
        with self._lock:
            return sum(1 for e in self._entries.values() if e.hold in (Hold.RUNNING, Hold.FINISHING))

    def begin(self, task: Task) -> bool:
        """Its handler is about to begin: whether to run it (and a claim put off may be due).

        False when the claim is no longer ours (its lease was lost, or it was
        given back, while it waited for a thread): its thread or slot is free
        again, and running it could run it twice.
        """
        with self._lock:
            entry = self._entries.get(_key(task))
            if entry is None:
                return False
            due = self._begun(entry)
            ours = entry.hold is Hold.RUNNING
            if not ours:
                self._handler_returned(entry)
        if due or not ours:
            self._on_free()
        return ours

    def start_finishing(self, task: Task) -> Hold:
        """Called when the handler returns; the answer says whether to report the outcome."""
        with self._lock:
            entry = self._entries[_key(task)]
            self._handler_returned(entry)
            if entry.hold is Hold.RUNNING:
                entry.hold = Hold.FINISHING
            hold = entry.hold
            put_off = self._claim_put_off(entry.kind)
        if not put_off:  # a put-off claim is woken by begin() once the claims waiting drop to its runway
            self._on_free()  # a thread is free: the claimer may fill it while the outcome is recorded
        return hold

    def lose(self, task: Task) -> bool:
        """The lease is gone: stop counting it. False if the claim already ended another way."""
        with self._lock:
            entry = self._entries.get(_key(task))
            if entry is None or entry.hold is not Hold.RUNNING:
                return False
            entry.hold = Hold.LOST
            self._uncount(entry)
        self._on_free()
        return True

    def take_for_release(self) -> list[Task]:
        """At the end of the grace period: every claim still running, marked released."""
        with self._lock:
            tasks = []
            for entry in self._entries.values():
                if entry.hold is Hold.RUNNING:
                    entry.hold = Hold.RELEASED
                    self._uncount(entry)
                    tasks.append(entry.task)
            return tasks

    def release_unbegun(self, tasks: list[Task]) -> list[Task]:
        """Of ``tasks``, the claims still running whose handler never began, marked released (to give back)."""
        with self._lock:
            released = []
            for task in tasks:
                entry = self._entries.get(_key(task))
                if entry is not None and entry.hold is Hold.RUNNING and not entry.begun:
                    entry.hold = Hold.RELEASED
                    self._uncount(entry)
                    released.append(task)
            return released

    def remove(self, task: Task) -> None:
        """The claim has ended: its outcome is recorded (or discarded)."""
        self.remove_all([task])

    def remove_all(self, tasks: list[Task]) -> None:
        """``remove`` for a recorded batch, under one lock and with one wake-up.

        No wake-up when every kind in the batch has its claim put off and no
        resource budget is shared: the claimer would only find the claim put
        off again (``begin`` wakes it when due). Once the worker is closing,
        every end wakes (the graceful end waits on it).
        """
        kinds: set[Kind] = set()
        with self._lock:
            for task in tasks:
                entry = self._entries.pop(_key(task), None)
                if entry is not None:
                    kinds.add(entry.kind)
                    self._held[entry.kind] -= 1
                    self._begun(entry)
                    self._handler_returned(entry)
                    self._uncount(entry)
            quiet = (bool(kinds) and self.capacity is None and not self._closing
                     and all(self._claim_put_off(kind) for kind in kinds))
        if not quiet:
            self._on_free()

    def close(self) -> None:
        """The worker winds down: from now on every claim that ends wakes whoever waits (see ``remove_all``)."""
        with self._lock:
            self._closing = True

    def _claim_put_off(self, kind: Kind) -> bool:
        resume = self._resume[kind]
        return resume is not None and self._waiting[kind] > resume

    def _begun(self, entry: Entry) -> bool:
        """Mark the entry begun; True when a claim put off is due now."""
        if entry.begun:
            return False
        entry.begun = True
        kind = entry.kind
        self._waiting[kind] -= 1
        resume = self._resume[kind]
        if resume is None or self._waiting[kind] > resume:
            return False
        self._resume[kind] = None
        return True

    def _handler_returned(self, entry: Entry) -> None:
        if not entry.returned:
            entry.returned = True
            self._busy[entry.kind] -= 1

    def _uncount(self, entry: Entry) -> None:
        if entry.counted:
            entry.counted = False
            self._in_use -= entry.task.required


def _key(task: Task) -> str:
    assert task.lease_token is not None, "a claimed task carries its lease token"
    return task.lease_token
