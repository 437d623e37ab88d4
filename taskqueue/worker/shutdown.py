"""A worker's graceful end: running handlers get the grace period, then their claims go back to the queue.

A claim given back is requeued without using up an attempt; its handler's
outcome, if it ever comes, is discarded. A coroutine, unlike a thread, can be
stopped, so an async handler given back is cancelled as well.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from ..errors import LeaseLost
from ..queue import TaskQueue
from ..task import Task
from .capacity import Capacity

log = logging.getLogger("taskqueue.worker")

SETTLE_SECONDS = 2.0


def drain(
    tq: TaskQueue,
    capacity: Capacity,
    *,
    grace: float,
    wake: threading.Event,
    abort: threading.Event,
    fields: dict[str, Any],
    cancel: Callable[[Task], None] | None = None,
) -> None:
    """Let running handlers finish for up to ``grace`` (``abort`` cuts it short), then give the rest back."""
    wait_settled(capacity, time.monotonic() + grace, wake=wake, abort=abort)
    released = capacity.take_for_release()
    if cancel is not None:
        for task in released:
            cancel(task)
    for task in released:
        give_back(tq, task, fields)
    # Outcomes already being recorded get a moment to commit.
    abort.clear()
    wait_settled(capacity, time.monotonic() + SETTLE_SECONDS, wake=wake, abort=abort)


def give_back(
    tq: TaskQueue,
    task: Task,
    fields: dict[str, Any],
    *,
    why: str = "still running after the grace period",
    level: int = logging.WARNING,
) -> bool:
    """Requeue ``task`` without using up an attempt; whether it went back (a failure is logged as a warning)."""
    extra = {**fields, "task_id": task.id, "queue": task.queue}
    try:
        tq.release(task, reason=f"given back by worker {fields['worker']} at shutdown")
    except LeaseLost:
        log.warning("task %s: lease already lost at shutdown", task.id, extra={**extra, "outcome": "lease_lost"})
    except Exception as exc:
        log.warning("task %s: could not give it back (%s); its lease will expire", task.id, exc,
                    extra={**extra, "outcome": "error"})
    else:
        log.log(level, "task %s (queue %s) %s; given back to the queue",
                task.id, task.queue, why, extra={**extra, "outcome": "released"})
        return True
    return False


def wait_settled(capacity: Capacity, deadline: float, *, wake: threading.Event, abort: threading.Event) -> None:
    """Until every outcome is recorded, the deadline, or ``abort``; ``wake`` is set whenever a claim ends."""
    while not abort.is_set():
        wake.clear()
        if not capacity.unsettled():
            return
        left = deadline - time.monotonic()
        if left <= 0:
            return
        wake.wait(min(left, 0.5))
