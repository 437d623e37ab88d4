"""Watches the worker's services: a crashed one is restarted with backoff, or the worker gives up loudly.

A worker is never left half-alive: a service that keeps crashing
(``MAX_RESTARTS`` within ``RESTART_WINDOW`` seconds) ends the whole worker
with :class:`~taskqueue.errors.ServiceFailed`, logged once, so a process
manager sees it exit non-zero and starts a fresh one.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Sequence

from ..errors import ServiceFailed
from .service import Service, WorkerSignals

log = logging.getLogger("taskqueue.worker")

MAX_RESTARTS = 5
RESTART_WINDOW = 60.0
BACKOFF_MIN = 0.1
BACKOFF_MAX = 5.0


class Supervisor:
    def __init__(
        self,
        services: Sequence[Service],
        *,
        worker: str,
        attention: threading.Event,
        signals: WorkerSignals | None = None,
    ) -> None:
        self.services = list(services)
        self.worker = worker
        self.attention = attention
        self.max_restarts = MAX_RESTARTS
        self._lock = threading.Lock()
        self._due: dict[str, float] = {}  # crashed service -> monotonic time of its restart
        self._history: dict[str, list[float]] = {}
        self.signals = signals if signals is not None else WorkerSignals()
        for service in self.services:
            service.on_crash = self._crashed

    def start(self) -> None:
        for service in self.services:
            service.start()

    def _crashed(self, service: Service, exc: BaseException) -> None:
        now = time.monotonic()
        with self._lock:
            recent = [t for t in self._history.get(service.name, []) if now - t < RESTART_WINDOW]
            recent.append(now)
            self._history[service.name] = recent
            self._due[service.name] = now + min(BACKOFF_MAX, BACKOFF_MIN * 2 ** (len(recent) - 1))
        self.attention.set()

    def tend(self) -> float | None:
        """Restart the services that are due; seconds until the next one, or None.

        Raises ServiceFailed when a service crashed more often than allowed.
        """
        now = time.monotonic()
        with self._lock:
            for name, times in self._history.items():
                if name in self._due and len(times) > self.max_restarts:
                    service = self._named(name)
                    raise ServiceFailed(name, len(times), RESTART_WINDOW, service.error)
            due = [name for name, at in self._due.items() if at <= now]
            for name in due:
                del self._due[name]
            left = min((at - now for at in self._due.values()), default=None)
        for name in due:
            service = self._named(name)
            log.warning("restarting service %s after it crashed (%s)", name, service.error,
                        extra={"worker": self.worker, "service": name})
            service.start()
            self.signals.restarted.signal(name)
        return left

    def _named(self, name: str) -> Service:
        return next(s for s in self.services if s.name == name)
