"""The parts of one ``Worker.run``, built from its settings and wired to each other.

:mod:`taskqueue.worker.worker` owns the settings and the run's life (start,
supervise, wind down); this module only says which services a run has and
what each is given: the claims' accounting, the handlers' threads (with
their GIL watch) or the inline lane, the async handlers (on a loop thread,
or in the inline lane), the listener (unless the queue polls), the
scheduling planner (with a capacity and a policy other than greedy), the
heartbeat and, on request, the maintainer.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..maintenance import Maintainer
from ..queue import TaskQueue
from ..registry import Registry
from ..scheduling.planner import Planner
from ..task import Task
from .aio import AsyncHandlers, AsyncLoop, async_runner, is_async_handler
from .capacity import Capacity
from .claimer import Claimer
from .completer import Completer
from .executor import Executor, Handler
from .gil import GilWatch
from .heartbeat import Heartbeat
from .inline import InlineLane
from .listener import Listener
from .service import Service, WorkerSignals

if TYPE_CHECKING:
    from .worker import Worker

log = logging.getLogger("taskqueue.worker")


@dataclass
class Events:
    """The worker's own events that its services set or watch."""

    wake: threading.Event  # the claimer's: something could make a claim succeed
    halt: threading.Event  # a stop was requested: no claim after it
    ready: threading.Event  # set once the worker LISTENs and made its first claim round


@dataclass
class Assembly:
    """What one run is made of; ``services`` in start order (the claimer last)."""

    capacity: Capacity
    completer: Completer
    executor: Executor
    lane: InlineLane | None
    async_handlers: AsyncHandlers | None
    registry: Registry
    listener: Listener | None
    claimer: Claimer
    heartbeat: Heartbeat
    maintainer: Maintainer | None
    services: list[Service]
    poll_only: bool
    threads: int
    async_slots: int


def assemble(
    worker: Worker,
    tq: TaskQueue,
    loop: asyncio.AbstractEventLoop | None,
    *,
    name: str,
    queues: list[str],
    events: Events,
    signals: WorkerSignals,
) -> Assembly:
    """Build the parts of a run of ``worker`` on ``tq`` (async handlers on ``loop``, or a loop of its own)."""
    handlers: Mapping[str, Handler] = worker.handlers
    threads = worker.effective_concurrency
    async_queues = [q for q in queues if q in handlers and is_async_handler(handlers[q])]
    async_slots = worker.effective_async_concurrency if async_queues else 0
    poll_only = tq.poll_only if worker.poll_only is None else worker.poll_only
    capacity = Capacity(worker.capacity, threads, on_free=events.wake.set, async_concurrency=async_slots,
                        claim_ahead=worker.claim_ahead, inline=worker.inline)
    completer = Completer(tq, capacity, worker=name, signals=signals)
    # Handler threads only: the inline lane runs one handler at a time, so there is nothing to take turns at.
    watch = None if worker.inline else GilWatch(threads, worker=name)
    executor = Executor(capacity, completer, handlers, worker=name, threads=threads, signals=signals, watch=watch)
    lane = None
    if worker.inline:  # no handler threads: the claimer runs the handlers between its rounds
        # Async handlers join the lane under run(); under run_async they stay on the caller's loop.
        lane = InlineLane(tq, executor.outcomes, completer, capacity, worker=name, lease=worker.lease,
                          async_queues=frozenset(async_queues if loop is None else ()))
    submit: Callable[[Task], None]
    async_handlers: AsyncHandlers | None
    if lane is not None and lane.async_handlers is not None:
        async_handlers, submit = lane.async_handlers, lane.submit
    else:
        async_handlers, submit = async_runner(
            executor.outcomes, executor.submit if lane is None else lane.submit, async_queues, loop
        )
    registry = Registry(tq, name=name, queues=queues, capacity=worker.capacity, policy=worker.policy, ttl=worker.lease)
    planner = None
    if worker.capacity is not None and worker.policy != "greedy":
        planner = Planner(registry, policy=worker.policy, capacity=worker.capacity, queues=queues)
    wake: Callable[[], None] = events.wake.set if planner is None else planner.waking(events.wake)
    notified = threading.Event()

    def on_notify() -> None:
        notified.set()
        wake()

    listener = None
    listening = threading.Event()
    if poll_only:  # PgBouncer in transaction mode: LISTEN cannot work, claims poll
        listening.set()
    else:
        listener = Listener(tq.dsn, tq.channel, on_notify, worker=name, signals=signals)
        listening = listener.connected
    claimer = Claimer(
        tq,
        capacity,
        planner=planner,
        queues=queues,
        worker=name,
        lease=worker.lease,
        poll_interval=worker.poll_interval,
        wake=events.wake,
        submit=submit,
        listening=listening,
        ready=events.ready,
        halt=events.halt,
        signals=signals,
        async_queues=async_queues,
        notified=notified,
        after_round=None if lane is None else lambda: lane.run_batch(
            lambda: claimer.stopping or events.halt.is_set(), claimer.claim_between),
    )
    heartbeat = Heartbeat(tq, capacity, lease=worker.lease, worker=name, registry=registry, signals=signals,
                          cancel=None if async_handlers is None else async_handlers.cancel)
    services: list[Service] = [completer, heartbeat] if lane is not None else [completer, executor, heartbeat]
    if listener is not None:
        services.append(listener)
    if async_handlers is not None and loop is None and (lane is None or lane.loop is None):
        services.append(AsyncLoop(async_handlers, worker=name, signals=signals))
    maintainer = None
    if worker.maintenance and poll_only:
        log.warning("poll_only: no maintenance on this worker (its leader lock needs a session, which "
                    "PgBouncer in transaction mode cannot keep); run one with a direct connection",
                    extra={"worker": name})
    elif worker.maintenance:
        maintainer = Maintainer(
            tq,
            worker=name,
            retention=worker.retention,
            interval=worker.maintenance_interval,
            prune_interval=worker.prune_interval,
            signals=signals,
        )
        services.append(maintainer)
    services.append(claimer)
    return Assembly(
        capacity=capacity, completer=completer, executor=executor, lane=lane, async_handlers=async_handlers,
        registry=registry, listener=listener, claimer=claimer, heartbeat=heartbeat, maintainer=maintainer,
        services=services, poll_only=poll_only, threads=threads, async_slots=async_slots,
    )
