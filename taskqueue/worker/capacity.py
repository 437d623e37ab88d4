"""Capacity accounting: the claims a worker holds, and what is left of its two budgets.

The worker holds a set of running claims. Two budgets limit it: the sum of
``required`` of the claims it still holds must stay within ``capacity``, and
the number of busy handler threads within ``concurrency``. A claim whose lease
was lost stops counting against capacity at once, but its thread stays busy
until the handler returns, because a Python thread cannot be killed.
"""

from __future__ import annotations

import enum
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

from ..scheduling.planner import RunningTask
from ..task import Task


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
    started: float = field(default=0.0)


class Capacity:
    """The claims this worker holds, and what is left of its two budgets. Thread-safe."""

    def __init__(self, capacity: int | None, concurrency: int, on_free: Callable[[], None]) -> None:
        self.capacity = capacity
        self.concurrency = concurrency
        self._on_free = on_free
        self._lock = threading.Lock()
        # Keyed by lease token, not task id: a task rescued from a lost lease
        # can be claimed again here while the old handler is still running.
        self._entries: dict[str, Entry] = {}
        self._in_use = 0
        self.peak_in_use = 0
        self.peak_threads = 0

    # -- budgets ------------------------------------------------------------
    def free(self) -> tuple[int | None, int]:
        """(capacity available or None for unlimited, free threads)."""
        with self._lock:
            threads = self.concurrency - len(self._entries)
            if self.capacity is None:
                return None, threads
            return max(0, self.capacity - self._in_use), threads

    @property
    def in_use(self) -> int:
        with self._lock:
            return self._in_use

    def busy(self) -> int:
        """Handler threads still busy (lost and released claims included)."""
        with self._lock:
            return len(self._entries)

    # -- life of a claim ----------------------------------------------------
    def add(self, task: Task, now: float) -> Entry:
        with self._lock:
            entry = Entry(task, started=now)
            self._entries[_key(task)] = entry
            self._in_use += task.required
            self.peak_in_use = max(self.peak_in_use, self._in_use)
            self.peak_threads = max(self.peak_threads, len(self._entries))
            return entry

    def running(self) -> list[RunningTask]:
        """The claims that count against capacity, as a scheduling plan needs them."""
        with self._lock:
            return [
                RunningTask(e.task.required, e.started, e.task.estimate, e.task.queue)
                for e in self._entries.values()
                if e.counted
            ]

    def holding(self) -> list[Task]:
        """Claims whose handler is still running: the ones to heartbeat."""
        with self._lock:
            return [e.task for e in self._entries.values() if e.hold is Hold.RUNNING]

    def unsettled(self) -> int:
        """Claims whose outcome is not recorded yet (handler running, or complete/fail in flight)."""
        with self._lock:
            return sum(1 for e in self._entries.values() if e.hold in (Hold.RUNNING, Hold.FINISHING))

    def start_finishing(self, task: Task) -> Hold:
        """Called when the handler returns; the answer says whether to report the outcome."""
        with self._lock:
            entry = self._entries[_key(task)]
            if entry.hold is Hold.RUNNING:
                entry.hold = Hold.FINISHING
            return entry.hold

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

    def remove(self, task: Task) -> None:
        """The handler thread is free again."""
        with self._lock:
            entry = self._entries.pop(_key(task), None)
            if entry is not None:
                self._uncount(entry)
        self._on_free()

    def _uncount(self, entry: Entry) -> None:
        if entry.counted:
            entry.counted = False
            self._in_use -= entry.task.required


def _key(task: Task) -> str:
    assert task.lease_token is not None, "a claimed task carries its lease token"
    return task.lease_token
