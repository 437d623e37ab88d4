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

from ..store import Store

log = logging.getLogger("taskqueue.worker.listener")

RECONNECT_MIN = 0.1
RECONNECT_MAX = 5.0


class Listener:
    def __init__(self, dsn: str, store: Store, wake: Callable[[], None], *, worker: str) -> None:
        self.dsn = dsn
        self.store = store
        self.wake = wake
        self.worker = worker
        self.connects = 0  # how many times LISTEN was (re)established
        self.connected = threading.Event()
        self._stop = threading.Event()
        self._conn: psycopg.Connection | None = None
        self._thread = threading.Thread(target=self._loop, name="taskqueue-listener", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5.0)

    def _loop(self) -> None:
        delay = RECONNECT_MIN
        while not self._stop.is_set():
            try:
                with psycopg.connect(
                    self.dsn,
                    autocommit=True,
                    application_name="taskqueue-listener",
                    connect_timeout=10,
                    keepalives=1,
                    keepalives_idle=10,
                    keepalives_interval=5,
                    keepalives_count=3,
                ) as conn:
                    self.store.listen(conn)
                    self.connects += 1
                    self.connected.set()
                    if self.connects > 1:
                        log.info("LISTEN connection re-established", extra={"worker": self.worker})
                    delay = RECONNECT_MIN
                    self.wake()
                    while not self._stop.is_set():
                        for _ in conn.notifies(timeout=0.25):
                            self.wake()
            except psycopg.Error as exc:
                self.connected.clear()
                if self._stop.is_set():
                    return
                log.warning(
                    "LISTEN connection lost (%s); reconnecting in %.1f s",
                    str(exc).strip() or type(exc).__name__,
                    delay,
                    extra={"worker": self.worker},
                )
                self._stop.wait(delay)
                delay = min(RECONNECT_MAX, delay * 2)
        self.connected.clear()
