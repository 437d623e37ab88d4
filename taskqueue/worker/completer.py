"""Records handler outcomes (complete or fail), many per transaction, on one thread.

Handler threads only hand their outcome over. One thread writes them, as many
as are waiting in one transaction: one commit instead of one per task, and ten
handler threads no longer fight the claim loop for the GIL and the pool. A
claim's capacity is freed only once its outcome is committed (or refused), so
the worker never runs more than its capacity as the database sees it.

While other handlers still run, the first outcome of a batch waits up to
``COALESCE_SECONDS`` for company (longer, up to ``MAX_COALESCE_SECONDS``,
while handlers finish far apart): a worker of 1 ms handlers otherwise writes
a transaction for every few tasks (measured: batches of about 15, each a
round trip, a commit and a turn at the GIL taken from the handlers). It does
not wait when the commit frees something another claim may be waiting for:
a pool slot (other workers), or this worker's resource ``capacity``.

A transient database error (a lost connection, a serialization failure) is
retried with backoff before the outcome is given up: a finished task whose
completion fails once would otherwise run again after its lease expires.
"""

from __future__ import annotations

import logging
import queue as queue_mod
import threading
import time
from collections import Counter
from collections.abc import Callable
from typing import Any, TypeVar

from ..dberrors import transient
from ..errors import LeaseLost
from ..queue import TaskQueue
from ..retry import backoff_seconds, with_retries
from .capacity import ASYNC, SYNC, Capacity
from .outcome import Report
from .service import Service, WorkerSignals

log = logging.getLogger("taskqueue.worker.completer")

MAX_BATCH = 200
#: How long the first outcome of a batch waits for more while handlers still run...
COALESCE_SECONDS = 0.005
#: ...or, when handlers finish slowly, long enough for about COMPANY outcomes, up to MAX_COALESCE_SECONDS:
#: each wait ends with a wake-up of this thread, which takes the GIL from the handlers. With 1 ms CPU-bound
#: handlers, 5 ms gathered about 5 outcomes a batch.
COMPANY = 16
MAX_COALESCE_SECONDS = 0.02
#: Successes are logged one by one at DEBUG, and summed at INFO at most this often (seconds).
#: A line per success at INFO cost about a third of a busy worker's time holding the GIL.
SUMMARY_SECONDS = 10.0
#: Tries of one write on transient errors, and the first pause (doubled each time).
WRITE_ATTEMPTS = 5
WRITE_BACKOFF = 0.1

T = TypeVar("T")


_STOP = object()


class Completer(Service):
    def __init__(
        self, tq: TaskQueue, capacity: Capacity, *, worker: str, signals: WorkerSignals | None = None
    ) -> None:
        super().__init__("completer", worker=worker, signals=signals)
        self.tq = tq
        self.capacity = capacity
        self.batches = 0
        self.summary_seconds = SUMMARY_SECONDS
        self._done: Counter[str] = Counter()
        self._summary_at = time.monotonic()
        self._inbox: queue_mod.SimpleQueue[Any] = queue_mod.SimpleQueue()
        self._urgent = threading.Event()  # ends a batch's wait for company: a pool slot to free, or a stop
        self._writing = threading.Lock()  # this thread and an inline lane (see inline.py) write in turn

    def submit(self, report: Report) -> None:
        self._inbox.put(report)
        if report.task.pool is not None:
            self._urgent.set()  # after the put: the batch that wakes for it finds it

    def interrupt(self) -> None:
        """Record what is waiting, then end the loop."""
        self._inbox.put(_STOP)
        self._urgent.set()

    def run(self) -> None:
        try:
            self._loop()
        finally:
            self._summarize(force=True)

    def _loop(self) -> None:
        while True:
            first = self._inbox.get()
            if first is _STOP:
                return
            batch, stop = self._gather(first)
            self.record(batch)
            if stop:
                return

    def _gather(self, first: Report) -> tuple[list[Report], bool]:
        """The batch that ``first`` opens, and whether the stop came meanwhile.

        The wait for company is one sleep, cut short only by an outcome that
        holds a pool slot (or a stop); what arrived meanwhile is taken after it.
        """
        batch = [first]
        stop, urgent = self._take_waiting(batch)
        if stop or urgent or len(batch) >= MAX_BATCH or not self._may_wait(first):
            return batch, stop
        self._urgent.wait(self._wait_seconds())
        self._urgent.clear()  # a submit after this finds its report taken below, or ends the next wait
        stop, _ = self._take_waiting(batch)
        return batch, stop

    def _take_waiting(self, batch: list[Report]) -> tuple[bool, bool]:
        """Add what waits in the inbox (up to MAX_BATCH): (the stop came, a pool slot is among them)."""
        urgent = False
        while len(batch) < MAX_BATCH:
            try:
                item = self._inbox.get_nowait()
            except queue_mod.Empty:
                break
            if item is _STOP:
                return True, urgent
            batch.append(item)
            urgent = urgent or item.task.pool is not None
        return False, urgent

    def _wait_seconds(self) -> float:
        """The wait for company: ``COALESCE_SECONDS``, longer while handlers finish far apart."""
        gap = self.capacity.finish_gap()
        if gap is None:
            return COALESCE_SECONDS
        return max(COALESCE_SECONDS, min(MAX_COALESCE_SECONDS, COMPANY * gap))

    def _may_wait(self, first: Report) -> bool:
        """Whether the batch may wait for company: more outcomes will come, and nobody waits on this commit."""
        cap = self.capacity
        if first.task.pool is not None or cap.capacity is not None:
            return False
        return cap.threads_busy(SYNC) + cap.threads_busy(ASYNC) > 0

    def record(self, batch: list[Report]) -> None:
        """Write ``batch`` now, on the calling thread, then end its claims (what the inline lane calls)."""
        with self._writing:
            self._record(batch)

    def _record(self, batch: list[Report]) -> None:
        done = [r for r in batch if r.error is None]
        states: dict[int, str | None] = {}
        if done:
            try:
                lost = set(self._retrying(lambda: self.tq.complete_many([(r.task, r.result) for r in done])))
                for r in done:
                    states[id(r)] = None if r.task.id in lost else r.task.state
            except Exception as exc:
                # Nothing of the batch was committed: write them one by one, so one
                # bad outcome cannot hold back the others.
                log.warning("completing %d tasks together failed (%s); one by one", len(done), exc,
                            extra={"worker": self.worker})
                for r in done:
                    states[id(r)] = self._alone(r)
        for r in batch:
            if r.error is not None:
                states[id(r)] = self._alone(r)
        self.batches += 1
        for r in batch:
            state = states[id(r)]
            if state != "error":
                self._log(r, state)
        self.capacity.remove_all([r.task for r in batch])
        self._summarize()
        self.signals.recorded.signal({r.task.id: states[id(r)] for r in batch})

    def _summarize(self, *, force: bool = False) -> None:
        """One INFO line for the successes since the last: how many, over how long, per queue."""
        now = time.monotonic()
        if not self._done or (not force and now - self._summary_at < self.summary_seconds):
            return
        total, span = sum(self._done.values()), now - self._summary_at
        per_queue = ", ".join(f"{queue} {count}" for queue, count in sorted(self._done.items()))
        log.info("%d tasks done in the last %.1f s (%s)", total, span, per_queue,
                 extra={"worker": self.worker, "outcome": "done", "done": dict(self._done), "seconds": round(span, 3)})
        self._done.clear()
        self._summary_at = now

    def _retrying(self, write: Callable[[], T]) -> T:
        """Run ``write``, again after a pause while it fails with a transient database error."""
        return with_retries(write, retryable=transient, attempts=WRITE_ATTEMPTS, delay=self._pause)

    def _pause(self, attempt: int) -> float:
        pause = WRITE_BACKOFF * 2.0 ** (attempt - 1)
        log.warning("recording outcomes failed; trying again in %.1f s", pause, extra={"worker": self.worker})
        return pause

    def _alone(self, report: Report) -> str | None:
        """Write one outcome in its own transaction: the new state, None if the lease was lost, or 'error'."""
        try:
            if report.error is None:
                self._retrying(lambda: self.tq.complete(report.task, report.result))
            else:
                if report.retry and report.retry_in is None:
                    # The queue's own default, chosen here so the log can say the real delay.
                    report.retry_in = backoff_seconds(report.task.attempts)
                self._retrying(
                    lambda: self.tq.fail(report.task, report.error, retry=report.retry, retry_in=report.retry_in)
                )
        except LeaseLost:
            return None
        except Exception:
            log.exception(
                "task %s: could not record its outcome; its lease will expire and it will be retried",
                report.task.id,
                extra={**report.fields, "outcome": "error"},
            )
            return "error"
        return report.task.state

    def _log(self, report: Report, state: str | None) -> None:
        task = report.task
        if state is None:
            log.warning(
                "task %s (queue %s): lease lost before the outcome was recorded; discarded",
                task.id,
                task.queue,
                extra={**report.fields, "outcome": "lease_lost"},
            )
            return
        outcome = report.label or ("retry" if state in ("queued", "scheduled") else state)
        if outcome == "done" and report.error is None and not log.isEnabledFor(logging.DEBUG):
            self._done[task.queue] += 1  # the common case, summed at INFO: no record to build
            return
        extra = {**report.fields, "outcome": outcome, "duration": round(report.duration, 6)}
        if report.error is None:
            quiet = outcome == "done"  # a cancelled one is worth a line of its own
            log.log(logging.DEBUG if quiet else logging.INFO, "task %s (queue %s) %s in %.3f s",
                    task.id, task.queue, outcome, report.duration, extra=extra)
            if quiet:
                self._done[task.queue] += 1
            return
        first_line = (task.error or "").split("\n", 1)[0]
        extra["error"] = first_line
        if outcome == "retry":
            extra["retry_in"] = report.retry_in
            log.info("task %s (queue %s) failed after %.3f s; retry in %s: %s", task.id, task.queue,
                     report.duration, _seconds(report.retry_in), first_line, extra=extra)
            return
        log.warning("task %s (queue %s) %s after %.3f s: %s", task.id, task.queue, outcome, report.duration,
                    first_line, extra=extra)


def _seconds(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:.3f} s" if value < 10 else f"{value:.0f} s"
