"""``Worker``: the long-lived process that claims what fits, runs handlers, and keeps itself healthy.

It runs the parts together, each a supervised service
(:mod:`taskqueue.worker.service`): the claimer fills free capacity in one
round trip, the executor runs handlers on daemon threads (async handlers run
on one event loop instead, see :mod:`taskqueue.worker.aio`; with ``inline``
the claimer runs both kinds itself, see :mod:`taskqueue.worker.inline`), the completer
records their outcomes in batches, the heartbeat keeps leases alive, the
listener turns NOTIFY into wake-ups, and the maintainer (on one worker at a
time) rescues expired leases and prunes old tasks. Which of them a run has,
and how they are wired, is :mod:`taskqueue.worker.assembly`'s job.

The calling thread supervises: it waits for a stop request or a crashed
service, restarts the latter with backoff, and gives up (ServiceFailed) when
one keeps crashing, so a worker is never left half-alive. Under
``run_async`` a thread of the worker supervises and the async handlers run
on the caller's event loop.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, TypeVar, overload

from ..errors import ServiceFailed, TaskQueueError, ValidationError
from ..maintenance import Maintainer
from ..operations import default_worker_name
from ..queue import TaskQueue

if TYPE_CHECKING:
    from ..aio import AsyncTaskQueue
from ..scheduling import DEFAULT_POLICY, POLICIES
from ..spec import check_int, check_lease, check_name, check_number
from .aio import AsyncHandlers, run_in_loop
from .assembly import Events, assemble
from .capacity import Capacity
from .claimer import Claimer
from .completer import Completer
from .executor import Executor, Handler
from .heartbeat import Heartbeat
from .listener import Listener
from .service import WorkerSignals
from .shutdown import drain
from .stop_signals import SignalWatcher
from .supervisor import Supervisor

log = logging.getLogger("taskqueue.worker")

H = TypeVar("H", bound=Handler)

#: Threads when neither concurrency nor capacity is given. Ten kept I/O-bound handlers (1 ms waits)
#: at a third of PGQueuer's default; 32 threads cost a no-op or CPU-bound handler nothing measurable.
DEFAULT_CONCURRENCY = 32
DEFAULT_ASYNC_CONCURRENCY = 100
MAX_DEFAULT_CONCURRENCY = 100


class Worker:
    """Runs handlers for one or more queues within a capacity budget.

    ``capacity`` bounds the sum of ``required`` of the running tasks (None: no
    bound); ``concurrency`` bounds the handler threads (default: ``capacity``,
    at most 100, or 32 when capacity is None). Handlers that are ``async def``
    run on one event loop instead, at most ``async_concurrency`` at a time
    (default 100). ``claim_ahead`` caps the claims held beyond the threads
    (default 100; 0 claims only what the threads can start now): more drains
    cheap handlers faster, at the cost of a longer wait for a task enqueued
    while the worker is busy. ``queues`` defaults to the queues that have a handler.
    ``poll_only`` (default: the queue's own setting) never LISTENs and claims
    every ``poll_interval`` instead, for PgBouncer in transaction mode.
    ``inline`` runs the handlers on the claim loop's own thread, with no
    hand-off between threads: sync ones one at a time, async ones (under
    ``run``) on an event loop of that thread, a group at a time. For CPU-bound
    handlers, one worker process per core (see :mod:`taskqueue.worker.inline`).
    """

    def __init__(
        self,
        *,
        queues: Iterable[str] | None = None,
        capacity: int | None = None,
        concurrency: int | None = None,
        lease: float = 30.0,
        poll_interval: float = 5.0,
        grace: float = 30.0,
        name: str | None = None,
        retention: float = 7 * 24 * 3600.0,
        log_level: int | str | None = None,
        maintenance: bool = True,
        maintenance_interval: float = 2.0,
        prune_interval: float = 300.0,
        policy: str = DEFAULT_POLICY,
        async_concurrency: int | None = None,
        poll_only: bool | None = None,
        claim_ahead: int | None = None,
        inline: bool = False,
    ) -> None:
        self.queues: list[str] | None = None
        self.inline = False
        self.async_concurrency: int | None = None
        self.claim_ahead: int | None = None
        self.policy = DEFAULT_POLICY
        self.capacity: int | None = None
        self.concurrency: int | None = None
        self.lease = 30.0
        self.grace = 30.0
        self.configure(
            queues=queues, capacity=capacity, concurrency=concurrency, lease=lease, grace=grace, policy=policy,
            async_concurrency=async_concurrency, claim_ahead=claim_ahead, inline=inline,
        )
        self.poll_only = None if poll_only is None else bool(poll_only)
        self.poll_interval = check_number(poll_interval, "poll_interval", minimum=0.0, maximum=3600.0, strict_min=True)
        self.name = None if name is None else check_name(name, "name")
        self.retention = check_number(retention, "retention", minimum=0.0, maximum=100 * 365 * 24 * 3600.0)
        self.maintenance = bool(maintenance)
        self.maintenance_interval = check_number(
            maintenance_interval, "maintenance_interval", minimum=0.0, maximum=3600.0, strict_min=True
        )
        self.prune_interval = check_number(
            prune_interval, "prune_interval", minimum=0.0, maximum=30 * 24 * 3600.0, strict_min=True
        )
        if log_level is not None:
            log.setLevel(log_level)
        self.handlers: dict[str, Handler] = {}
        self._wake = threading.Event()
        self._attention = threading.Event()  # the supervisor's: a stop request or a crashed service
        self._stopping = threading.Event()
        self._abort = threading.Event()
        self._running = threading.Event()
        self._run_lock = threading.Lock()
        self.signals = WorkerSignals()
        """Test signals of the services (see :class:`~taskqueue.worker.service.WorkerSignals`); off until init()."""
        self.ready = threading.Event()
        """Set once the worker LISTENs and has made its first claim round (tests wait on it)."""
        self.listener: Listener | None = None
        self.maintainer: Maintainer | None = None
        self.claimer: Claimer | None = None
        self.completer: Completer | None = None
        self.heartbeat: Heartbeat | None = None
        self.executor: Executor | None = None
        self.async_handlers: AsyncHandlers | None = None
        self.supervisor: Supervisor | None = None
        self.capacity_state: Capacity | None = None
        self.on_services: list[Any] = []
        """Callbacks given this Worker once its services exist, before they start (tests inject faults here)."""

    # -- configuration ------------------------------------------------------
    def configure(
        self,
        *,
        queues: Iterable[str] | None = None,
        capacity: int | None = None,
        concurrency: int | None = None,
        lease: float | None = None,
        grace: float | None = None,
        policy: str | None = None,
        async_concurrency: int | None = None,
        claim_ahead: int | None = None,
        inline: bool | None = None,
    ) -> Worker:
        """Override settings (the CLI flags); None leaves a setting as it is. Before ``run`` only."""
        if inline is not None and not isinstance(inline, bool):
            raise ValidationError("inline", f"must be True or False, got {inline!r}")
        threads = self.concurrency if concurrency is None else check_int(
            concurrency, "concurrency", minimum=1, maximum=10_000)
        if (self.inline if inline is None else inline) and threads not in (None, 1):
            raise ValidationError("concurrency", f"inline runs one handler at a time; got concurrency={threads} "
                                                 "(leave it unset, or run more worker processes)")
        if inline is not None:
            self.inline = inline
        if queues is not None:
            if isinstance(queues, str):
                raise ValidationError("queues", "must be a list of queue names, not a single string")
            names = [check_name(q, "queues") for q in queues]
            if not names:
                raise ValidationError("queues", "must not be empty (pass None for the queues with handlers)")
            self.queues = sorted(set(names))
        if capacity is not None:
            self.capacity = check_int(capacity, "capacity", minimum=0, maximum=2**62)
        if concurrency is not None:
            self.concurrency = threads
        if async_concurrency is not None:
            self.async_concurrency = check_int(async_concurrency, "async_concurrency", minimum=1, maximum=100_000)
        if claim_ahead is not None:
            self.claim_ahead = check_int(claim_ahead, "claim_ahead", minimum=0, maximum=100_000)
        if lease is not None:
            self.lease = check_lease(lease)
        if grace is not None:
            self.grace = check_number(grace, "grace", minimum=0.0, maximum=7 * 24 * 3600.0)
        if policy is not None:
            if policy not in POLICIES:
                raise ValidationError("policy", f"must be one of {', '.join(POLICIES)}, got {policy!r}")
            self.policy = policy
        return self

    @overload
    def handler(self, queue: str) -> Callable[[H], H]: ...

    @overload
    def handler(self, queue: str, func: H) -> H: ...

    def handler(self, queue: str, func: H | None = None) -> H | Callable[[H], H]:
        """Register the handler of ``queue`` (one per queue). Use as ``@worker.handler("q")``.

        An ``async def`` handler (or a callable whose ``__call__`` is one) runs on the worker's event loop.
        """
        queue = check_name(queue, "queue")

        def register(fn: H) -> H:
            if not callable(fn):
                raise ValidationError("handler", f"must be callable, got {type(fn).__name__}")
            if queue in self.handlers:
                raise ValidationError("queue", f"{queue!r} already has a handler")
            self.handlers[queue] = fn
            return fn

        return register if func is None else register(func)

    @property
    def effective_concurrency(self) -> int:
        if self.inline:
            return 1
        if self.concurrency is not None:
            return self.concurrency
        if self.capacity is None:
            return DEFAULT_CONCURRENCY
        return max(1, min(self.capacity, MAX_DEFAULT_CONCURRENCY))

    @property
    def effective_async_concurrency(self) -> int:
        return DEFAULT_ASYNC_CONCURRENCY if self.async_concurrency is None else self.async_concurrency

    @property
    def running(self) -> bool:
        """True while ``run`` is inside its main loop (claims may happen)."""
        return self._running.is_set()

    # -- control ------------------------------------------------------------
    def stop(self, *, now: bool = False) -> None:
        """Stop claiming and wind down (thread-safe). ``now``: skip the grace period."""
        if now:
            self._abort.set()
        self._stopping.set()
        self._wake.set()
        self._attention.set()

    def wake(self) -> None:
        """Claim again now (thread-safe)."""
        self._wake.set()

    def _on_signal(self, count: int) -> None:
        # Called on the signal watcher's thread, never inside a signal handler:
        # the first signal winds down, a second one (or one after stop()) stops at once.
        self.stop(now=count > 1 or self._stopping.is_set())

    # -- the run ------------------------------------------------------------
    def run(self, tq: TaskQueue) -> None:
        """Run until ``stop()`` or SIGTERM/SIGINT; then finish or give back running tasks and return.

        Async handlers run on an event loop of the worker's own, on a thread.
        """
        self._take_run(tq)
        try:
            self._run(tq)
        finally:
            self._run_lock.release()

    async def run_async(self, tq: TaskQueue | AsyncTaskQueue) -> None:
        """Run inside the running event loop until ``stop()``, or until the awaiting task is cancelled.

        Async handlers run on this loop; claims, heartbeats and outcomes on the worker's threads (with a
        sync handle of their own, given an AsyncTaskQueue). Cancelling the awaiting task winds the worker
        down as ``stop()`` does, then re-raises CancelledError. No signal handler is installed.
        """
        from ..aio import AsyncTaskQueue

        if isinstance(tq, AsyncTaskQueue):
            with TaskQueue(tq.dsn, schema=tq.schema, poll_only=tq.poll_only) as own:
                return await self.run_async(own)
        self._take_run(tq)
        await run_in_loop(lambda loop: self._run(tq, loop), stop=self.stop, handlers=lambda: self.async_handlers,
                          release=self._run_lock.release)

    def _take_run(self, tq: TaskQueue) -> None:
        if not isinstance(tq, TaskQueue):
            raise ValidationError("tq", f"must be a TaskQueue, got {type(tq).__name__}")
        if not self._run_lock.acquire(blocking=False):
            raise TaskQueueError("this Worker is already running; create another Worker for a second run")

    def _run(self, tq: TaskQueue, loop: asyncio.AbstractEventLoop | None = None) -> None:
        queues = self.queues if self.queues is not None else sorted(self.handlers)
        if not queues:
            raise ValidationError("queues", "no queues to work on: register a handler or pass queues=")
        missing = [q for q in queues if q not in self.handlers]
        name = self.name or default_worker_name()
        fields = {"worker": name}
        if missing:
            log.warning("queues without a handler (their tasks will fail): %s", ", ".join(missing), extra=fields)
        self._wake.clear()
        self.ready.clear()

        parts = assemble(self, tq, loop, name=name, queues=queues, signals=self.signals,
                         events=Events(wake=self._wake, halt=self._stopping, ready=self.ready))
        capacity, claimer, services = parts.capacity, parts.claimer, parts.services
        self.capacity_state, self.async_handlers = capacity, parts.async_handlers
        self.listener, self.maintainer, self.claimer = parts.listener, parts.maintainer, claimer
        self.completer, self.heartbeat, self.executor = parts.completer, parts.heartbeat, parts.executor
        supervisor = Supervisor(services, worker=name, attention=self._attention, signals=self.signals)
        self.supervisor = supervisor
        for hook in self.on_services:
            hook(self)

        stop_signals = SignalWatcher(self._on_signal)
        if loop is None:  # under run_async the host application owns the signals
            stop_signals.install()
        log.info(
            "worker %s starting: queues=%s capacity=%s policy=%s concurrency=%d async_concurrency=%d lease=%gs%s%s",
            name,
            ",".join(queues),
            self.capacity,
            self.policy,
            parts.threads,
            parts.async_slots,
            self.lease,
            " poll_only" if parts.poll_only else "",
            " inline" if self.inline else "",
            extra={
                **fields, "queues": queues, "capacity": self.capacity, "policy": self.policy,
                "concurrency": parts.threads, "async_concurrency": parts.async_slots, "poll_only": parts.poll_only,
                "inline": self.inline,
            },
        )
        failure: ServiceFailed | None = None
        try:
            parts.heartbeat.register()  # in the registry before the first claim, so the fleet sees this worker
            supervisor.start()
            self._running.set()
            try:
                self._supervise(supervisor)
            except ServiceFailed as exc:
                failure = exc
                log.error("worker %s giving up: %s", name, exc, extra={**fields, "service": exc.service})
                self._abort.set()  # no grace: a part of the worker is gone
            self._running.clear()
            log.info("worker %s stopping: no new claims", name, extra=fields)
            # An inline claimer may be inside a handler: it ends after it (its outcome written, the rest given
            # back), while the grace period below runs.
            claimer.stop(timeout=0.0 if parts.lane is not None else None)
            capacity.close()
            drain(tq, capacity, grace=self.grace, wake=self._wake, abort=self._abort, fields=fields,
                  cancel=None if self.async_handlers is None else self.async_handlers.cancel)
        finally:
            self._running.clear()
            for service in reversed(services):
                if service is not claimer:
                    service.stop()
            claimer.stop()
            if parts.lane is not None:
                parts.lane.close()  # its event loop, once the claimer's thread has left it
            parts.registry.leave_or_expire()
            stop_signals.restore()
            # Ready for another run(); a stop() that came before this run() was honoured.
            self._stopping.clear()
            self._abort.clear()
            self._attention.clear()
            log.info("worker %s stopped", name, extra=fields)
        if failure is not None:
            raise failure

    def _supervise(self, supervisor: Supervisor) -> None:
        """Until a stop request: restart crashed services when due (raises ServiceFailed on giving up)."""
        timeout: float | None = None
        while not self._stopping.is_set():
            self._attention.wait(1.0 if timeout is None else timeout)
            self._attention.clear()
            timeout = supervisor.tend()
