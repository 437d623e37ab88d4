"""One small base for the worker's background loops: start, stop, join, and a crash that is never silent.

A service runs :meth:`Service.run` on daemon threads (one, or ``size`` for a
thread pool). ``stop`` asks it to end; ``join`` waits with a timeout and says
whether it ended. An exception that escapes ``run`` is logged once, kept in
``error``, and reported to ``on_crash`` so the :class:`Worker`'s supervisor
can restart the service or end the worker; a thread never just disappears.
Starting again after a crash replaces only the dead threads.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from typing import Generic, TypeVar

from ..errors import TaskQueueError
from ..task import Task

log = logging.getLogger("taskqueue.worker")

T = TypeVar("T")


class TestSignal(Generic[T]):
    """An event the code raises at a known point, for tests to wait on instead of sleeping.

    Off (and free) until a test calls :meth:`init`; then every ``signal`` is
    queued, and :meth:`wait` takes the next one or raises ``TimeoutError``.
    """

    __test__ = False  # not a pytest test class

    def __init__(self) -> None:
        self._values: list[T] | None = None
        self._cond = threading.Condition()

    def init(self) -> None:
        with self._cond:
            self._values = []

    def signal(self, value: T) -> None:
        if self._values is None:
            return
        with self._cond:
            if self._values is not None:
                self._values.append(value)
                self._cond.notify_all()

    def wait(self, timeout: float = 10.0) -> T:
        with self._cond:
            if self._values is None:
                raise TaskQueueError("TestSignal.wait() before init()")
            if not self._cond.wait_for(lambda: bool(self._values), timeout):
                raise TimeoutError(f"no signal within {timeout} s")
            return self._values.pop(0)


@dataclass(frozen=True)
class WorkerSignals:
    """The known points of a worker's services, for tests (``worker.signals.init()`` switches them on)."""

    __test__ = False

    #: The tasks of every claim round (an empty list when nothing fitted).
    claimed: TestSignal[list[Task]] = field(default_factory=TestSignal)
    #: {task id: new state, None if the lease was lost, "error"} per recorded batch.
    recorded: TestSignal[dict[int, str | None]] = field(default_factory=TestSignal)
    #: How many leases each heartbeat found lost.
    beaten: TestSignal[int] = field(default_factory=TestSignal)
    #: The count of LISTEN connections so far, at each (re)connection.
    listening: TestSignal[int] = field(default_factory=TestSignal)
    #: Whether each maintenance round was done as the leader.
    maintained: TestSignal[bool] = field(default_factory=TestSignal)
    #: The name of every service restarted after a crash.
    restarted: TestSignal[str] = field(default_factory=TestSignal)
    #: (service name, error) of every crash.
    crashed: TestSignal[tuple[str, BaseException]] = field(default_factory=TestSignal)

    def init(self) -> None:
        for f in fields(self):
            getattr(self, f.name).init()


CrashHandler = Callable[["Service", BaseException], None]


class Service:
    """A background loop. Subclasses implement ``run``, which returns once ``stopping`` is set."""

    #: How long ``stop`` waits by default for the threads to end.
    join_timeout = 10.0

    def __init__(self, name: str, *, worker: str, size: int = 1, signals: WorkerSignals | None = None) -> None:
        self.name = name
        self.worker = worker
        self.size = size
        self.signals = signals if signals is not None else WorkerSignals()
        self.error: BaseException | None = None
        self.on_crash: CrashHandler | None = None
        self._stop = threading.Event()
        self._threads: list[threading.Thread | None] = [None] * size

    # -- the loop -----------------------------------------------------------
    def run(self) -> None:
        raise NotImplementedError

    @property
    def stopping(self) -> bool:
        return self._stop.is_set()

    def wait(self, seconds: float) -> bool:
        """Sleep that ``stop`` cuts short; True if stopping."""
        return self._stop.wait(seconds)

    def interrupt(self) -> None:
        """Wake a ``run`` blocked elsewhere than in ``wait`` (an inbox, a socket) so it sees ``stopping``."""

    # -- control ------------------------------------------------------------
    def start(self) -> None:
        """Start every thread that is not running (all of them the first time)."""
        self._stop.clear()
        self.error = None
        for i, thread in enumerate(self._threads):
            if thread is None or not thread.is_alive():
                suffix = f"-{i}" if self.size > 1 else ""
                thread = threading.Thread(target=self._main, name=f"taskqueue-{self.name}{suffix}", daemon=True)
                self._threads[i] = thread
                thread.start()

    def stop(self, timeout: float | None = None) -> bool:
        """Ask the service to end and wait for it; True if every thread ended in time."""
        self._stop.set()
        self.interrupt()
        ended = self.join(self.join_timeout if timeout is None else timeout)
        if not ended and timeout is None and self.join_timeout > 0:  # a timeout given: the caller waits on
            log.warning("%s did not stop within its timeout; leaving its daemon threads", self.name,
                        extra={"worker": self.worker, "service": self.name})
        return ended

    def join(self, timeout: float) -> bool:
        for thread in self._threads:
            if thread is not None:
                thread.join(timeout)
        return not self.alive_threads()

    def alive_threads(self) -> int:
        return sum(1 for t in self._threads if t is not None and t.is_alive())

    @property
    def alive(self) -> bool:
        """Every thread is running (a service that crashed or stopped is not alive)."""
        return self.alive_threads() == self.size

    def _main(self) -> None:
        try:
            self.run()
        except BaseException as exc:
            if self.stopping and isinstance(exc, SystemExit):
                return
            self.error = exc
            log.error("service %s crashed: %s: %s", self.name, type(exc).__name__, exc, exc_info=exc,
                      extra={"worker": self.worker, "service": self.name})
            self.signals.crashed.signal((self.name, exc))
            if self.on_crash is not None:
                self.on_crash(self, exc)
