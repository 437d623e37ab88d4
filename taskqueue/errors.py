"""Exceptions raised by taskqueue.

Every error a caller can act on derives from :class:`TaskQueueError`, so one
``except`` clause covers the library. ``ValidationError`` is also a
``ValueError`` because it always means "the argument you passed is wrong".
"""

from __future__ import annotations


class TaskQueueError(Exception):
    """Base class of every error raised by taskqueue."""


class ValidationError(TaskQueueError, ValueError):
    """Bad input; raised before anything is written. ``field`` names the culprit."""

    def __init__(self, field: str, message: str) -> None:
        self.field = field
        super().__init__(f"{field}: {message}")


class DatabaseError(TaskQueueError):
    """The database refused or could not run a statement; ``__cause__`` is the driver's error.

    Raised from the one place that runs SQL (:mod:`taskqueue.db`), so callers
    catch one family. ``transient`` says whether trying again may succeed (a
    lost connection, a serialization failure, a deadlock, a lock timeout).
    """

    def __init__(self, message: str, *, transient: bool = False, sqlstate: str | None = None) -> None:
        self.transient = transient
        self.sqlstate = sqlstate
        super().__init__(message)


class SchemaMissing(DatabaseError):
    """The queue schema is missing or older than this code: run ``taskqueue migrate``."""


class LeaseLost(TaskQueueError):
    """The claim behind a task handle is no longer current.

    Raised by heartbeat/complete/fail when the task was rescued after its lease
    expired, or already finished. Nothing was changed.
    """

    def __init__(self, task_id: int, action: str) -> None:
        self.task_id = task_id
        self.action = action
        super().__init__(
            f"task {task_id}: cannot {action}: this claim is no longer current "
            "(the lease expired and the task was rescued, or it already finished)"
        )


class Retry(TaskQueueError):
    """Raised by a handler to ask for a retry after ``in_`` seconds (default backoff if None)."""

    def __init__(self, in_: float | None = None, reason: str = "retry requested") -> None:
        self.in_ = in_
        self.reason = reason
        super().__init__(reason if in_ is None else f"{reason} (in {in_} s)")


class Permanent(TaskQueueError):
    """Raised by a handler to fail its task with no further attempts."""


class ServiceFailed(TaskQueueError):
    """A worker service kept crashing; the worker gave up (after giving its running tasks back)."""

    def __init__(self, service: str, crashes: int, window: float, error: BaseException | None) -> None:
        self.service = service
        self.crashes = crashes
        self.error = error
        detail = "" if error is None else f": {type(error).__name__}: {error}"
        super().__init__(f"worker service {service!r} crashed {crashes} times within {window:g} s{detail}")


class DuplicateTask(TaskQueueError):
    """A retry would make a second live task with the same (queue, dedupe_key); nothing changed."""

    def __init__(self, task_id: int, queue: str, dedupe_key: str | None) -> None:
        self.task_id = task_id
        self.queue = queue
        self.dedupe_key = dedupe_key
        super().__init__(
            f"task {task_id}: cannot retry: another live task in queue {queue!r} holds dedupe key {dedupe_key!r}"
        )
