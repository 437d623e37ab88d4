"""``Worker``: the long-lived process that claims what fits, runs handlers, and keeps itself healthy.

It wires the parts together, each a supervised service
(:mod:`taskqueue.worker.service`): the claimer fills free capacity in one
round trip, the executor runs handlers on daemon threads, the completer
records their outcomes in batches, the heartbeat keeps leases alive, the
listener turns NOTIFY into wake-ups, and the maintainer (on one worker at a
time) rescues expired leases and prunes old tasks.

The calling thread supervises: it waits for a stop request or a crashed
service, restarts the latter with backoff, and gives up (ServiceFailed) when
one keeps crashing, so a worker is never left half-alive.
"""

from __future__ import annotations

import logging
import signal
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any, TypeVar, overload

from ..errors import LeaseLost, ServiceFailed, TaskQueueError, ValidationError
from ..maintenance import Maintainer
from ..operations import default_worker_name
from ..queue import TaskQueue
from ..registry import Registry
from ..scheduling import DEFAULT_POLICY, POLICIES
from ..scheduling.planner import Planner
from ..spec import check_int, check_lease, check_name, check_number
from .capacity import Capacity
from .claimer import Claimer
from .completer import Completer
from .executor import Executor, Handler
from .heartbeat import Heartbeat
from .listener import Listener
from .service import Service, WorkerSignals
from .supervisor import Supervisor

log = logging.getLogger("taskqueue.worker")

H = TypeVar("H", bound=Handler)

DEFAULT_CONCURRENCY = 10
MAX_DEFAULT_CONCURRENCY = 100
SETTLE_SECONDS = 2.0


class Worker:
    """Runs handlers for one or more queues within a capacity budget.

    ``capacity`` bounds the sum of ``required`` of the running tasks (None: no
    bound); ``concurrency`` bounds the handler threads (default: ``capacity``,
    at most 100, or 10 when capacity is None). ``queues`` defaults to the queues
    that have a handler.
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
    ) -> None:
        self.queues: list[str] | None = None
        self.policy = DEFAULT_POLICY
        self.capacity: int | None = None
        self.concurrency: int | None = None
        self.lease = 30.0
        self.grace = 30.0
        self.configure(
            queues=queues, capacity=capacity, concurrency=concurrency, lease=lease, grace=grace, policy=policy
        )
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
    ) -> Worker:
        """Override settings (the CLI flags); None leaves a setting as it is. Before ``run`` only."""
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
            self.concurrency = check_int(concurrency, "concurrency", minimum=1, maximum=10_000)
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
        """Register the handler of ``queue`` (one per queue). Use as ``@worker.handler("q")``."""
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
        if self.concurrency is not None:
            return self.concurrency
        if self.capacity is None:
            return DEFAULT_CONCURRENCY
        return max(1, min(self.capacity, MAX_DEFAULT_CONCURRENCY))

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

    def _on_signal(self, signum: int, _frame: Any) -> None:
        # Keep it tiny: a signal handler runs between two bytecodes of the main thread.
        if self._stopping.is_set():
            self._abort.set()
        self._stopping.set()
        self._wake.set()
        self._attention.set()

    # -- the run ------------------------------------------------------------
    def run(self, tq: TaskQueue) -> None:
        """Run until ``stop()`` or SIGTERM/SIGINT; then finish or give back running tasks and return."""
        if not isinstance(tq, TaskQueue):
            raise ValidationError("tq", f"must be a TaskQueue, got {type(tq).__name__}")
        if not self._run_lock.acquire(blocking=False):
            raise TaskQueueError("this Worker is already running; create another Worker for a second run")
        try:
            self._run(tq)
        finally:
            self._run_lock.release()

    def _run(self, tq: TaskQueue) -> None:
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

        threads = self.effective_concurrency
        capacity = Capacity(self.capacity, threads, on_free=self._wake.set)
        self.capacity_state = capacity
        completer = Completer(tq, capacity, worker=name, signals=self.signals)
        executor = Executor(capacity, completer, self.handlers, worker=name, threads=threads, signals=self.signals)
        registry = Registry(
            tq, name=name, queues=queues, capacity=self.capacity, policy=self.policy, ttl=self.lease
        )
        planner = None
        if self.capacity is not None and self.policy != "greedy":
            planner = Planner(registry, policy=self.policy, capacity=self.capacity, queues=queues)
        on_notify = self._wake.set if planner is None else planner.waking(self._wake)
        listener = Listener(tq.dsn, tq.channel, on_notify, worker=name, signals=self.signals)
        claimer = Claimer(
            tq,
            capacity,
            planner=planner,
            queues=queues,
            worker=name,
            lease=self.lease,
            poll_interval=self.poll_interval,
            wake=self._wake,
            submit=executor.submit,
            listening=listener.connected,
            ready=self.ready,
            halt=self._stopping,
            signals=self.signals,
        )
        heartbeat = Heartbeat(tq, capacity, lease=self.lease, worker=name, registry=registry, signals=self.signals)
        services: list[Service] = [completer, executor, heartbeat, listener]
        maintainer = None
        if self.maintenance:
            maintainer = Maintainer(
                tq,
                worker=name,
                retention=self.retention,
                interval=self.maintenance_interval,
                prune_interval=self.prune_interval,
                signals=self.signals,
            )
            services.append(maintainer)
        services.append(claimer)
        self.listener, self.maintainer, self.claimer = listener, maintainer, claimer
        self.completer, self.heartbeat, self.executor = completer, heartbeat, executor
        supervisor = Supervisor(services, worker=name, attention=self._attention, signals=self.signals)
        self.supervisor = supervisor
        for hook in self.on_services:
            hook(self)

        previous = self._install_signals()
        log.info(
            "worker %s starting: queues=%s capacity=%s policy=%s concurrency=%d lease=%gs",
            name,
            ",".join(queues),
            self.capacity,
            self.policy,
            threads,
            self.lease,
            extra={
                **fields, "queues": queues, "capacity": self.capacity, "policy": self.policy, "concurrency": threads
            },
        )
        failure: ServiceFailed | None = None
        try:
            heartbeat.register()  # in the registry before the first claim, so the fleet sees this worker
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
            claimer.stop()
            self._drain(tq, capacity, fields)
        finally:
            self._running.clear()
            for service in reversed(services):
                if service is not claimer:
                    service.stop()
            claimer.stop()
            registry.leave_or_expire()
            self._restore_signals(previous)
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

    def _drain(self, tq: TaskQueue, capacity: Capacity, fields: dict[str, Any]) -> None:
        """Let running handlers finish for up to ``grace``, then give the rest back."""
        deadline = time.monotonic() + self.grace
        self._wait_settled(deadline)
        for task in capacity.take_for_release():
            try:
                tq.release(task, reason=f"given back by worker {fields['worker']} at shutdown")
            except LeaseLost:
                log.warning("task %s: lease already lost at shutdown", task.id,
                            extra={**fields, "task_id": task.id, "queue": task.queue, "outcome": "lease_lost"})
            except Exception as exc:
                log.warning("task %s: could not give it back (%s); its lease will expire", task.id, exc,
                            extra={**fields, "task_id": task.id, "queue": task.queue, "outcome": "error"})
            else:
                log.warning(
                    "task %s (queue %s) still running after the grace period; given back to the queue",
                    task.id,
                    task.queue,
                    extra={**fields, "task_id": task.id, "queue": task.queue, "outcome": "released"},
                )

        # Outcomes already being recorded get a moment to commit.
        self._abort.clear()
        self._wait_settled(time.monotonic() + SETTLE_SECONDS)

    def _wait_settled(self, deadline: float) -> None:
        capacity = self.capacity_state
        assert capacity is not None
        while not self._abort.is_set():
            self._wake.clear()
            if not capacity.unsettled():
                return
            left = deadline - time.monotonic()
            if left <= 0:
                return
            self._wake.wait(min(left, 0.5))

    # -- signals ------------------------------------------------------------
    def _install_signals(self) -> dict[signal.Signals, Any] | None:
        if threading.current_thread() is not threading.main_thread():
            return None
        previous: dict[signal.Signals, Any] = {}
        for sig in (signal.SIGTERM, signal.SIGINT):
            previous[sig] = signal.signal(sig, self._on_signal)
        return previous

    @staticmethod
    def _restore_signals(previous: dict[signal.Signals, Any] | None) -> None:
        if previous is None:
            return
        for sig, handler in previous.items():
            signal.signal(sig, handler if handler is not None else signal.SIG_DFL)


