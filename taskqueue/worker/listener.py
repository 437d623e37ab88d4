"""LISTENs for wake-ups on a dedicated connection, and reconnects when it dies.

The connection is a raw psycopg autocommit one, outside the SQLAlchemy pool:
a pooled connection would be handed to other work, and LISTEN belongs to the
session. Every (re)connection also wakes the worker, since notifications sent
while it was gone are lost.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

import psycopg

from ..db import LISTEN_CONNECT_ARGS, listen
from .service import Service, WorkerSignals

log = logging.getLogger("taskqueue.worker.listener")

RECONNECT_MIN = 0.1
RECONNECT_MAX = 5.0


class Listener(Service):
    join_timeout = 5.0

    def __init__(
        self, dsn: str, channel: str, wake: Callable[[], None], *, worker: str, signals: WorkerSignals | None = None
    ) -> None:
        super().__init__("listener", worker=worker, signals=signals)
        self.dsn = dsn
        self.channel = channel
        self.wake = wake
        self.connects = 0  # how many times LISTEN was (re)established
        self.connected = threading.Event()

    def run(self) -> None:
        try:
            self._listen()
        finally:
            self.connected.clear()

    def _listen(self) -> None:
        delay = RECONNECT_MIN
        while not self.stopping:
            try:
                with psycopg.connect(self.dsn, **LISTEN_CONNECT_ARGS) as conn:
                    listen(conn, self.channel)
                    self.connects += 1
                    self.connected.set()
                    self.signals.listening.signal(self.connects)
                    if self.connects > 1:
                        log.info("LISTEN connection re-established", extra={"worker": self.worker})
                    delay = RECONNECT_MIN
                    self.wake()
                    while not self.stopping:
                        for _ in conn.notifies(timeout=0.25):
                            self.wake()
            except Exception as exc:  # a lost socket, and anything else: reconnect, never die quietly
                self.connected.clear()
                if self.stopping:
                    return
                log.warning(
                    "LISTEN connection lost (%s); reconnecting in %.1f s",
                    str(exc).strip() or type(exc).__name__,
                    delay,
                    extra={"worker": self.worker},
                )
                self.wait(delay)
                delay = min(RECONNECT_MAX, delay * 2)
