"""A few pooled connections kept checked out in autocommit, for one-statement calls.

Why: a single enqueue, claim or complete is one autocommit round trip, and
around it SQLAlchemy's checkout and check-in (the fairy, the events, the
reset, two autocommit switches) cost 20 to 30 us of client CPU: a sixth of
a single enqueue's, a fifth of a claim + complete loop's (docs/performance.md,
"One-statement calls on held connections"). Held connections skip all of
that and keep their prepared statements. They are the engine pool's own connections, so the pool's limit
(``pool_size + max_overflow``) still bounds the total.

A held connection is checked before each use exactly as the pool's checkout
checks one (closed, broken, or the server's goodbye waiting on the socket);
one that fails is invalidated and another is taken. When every held
connection is busy the caller uses the pool as before, so this never waits.
"""

from __future__ import annotations

import os
import select
import threading
from typing import Any, NamedTuple

import psycopg
from psycopg.pq import TransactionStatus
from sqlalchemy.pool import Pool, PoolProxiedConnection

#: Held connections per Database: a worker's claimer and completer each find one free.
HELD = 2


def has_pending_input(fd: int) -> bool:
    """Whether the server sent anything to an idle connection, without waiting."""
    if hasattr(select, "poll"):
        poller = select.poll()
        poller.register(fd, select.POLLIN | select.POLLERR | select.POLLHUP)
        return bool(poller.poll(0))
    readable, _, _ = select.select([fd], [], [], 0)  # pragma: no cover - platforms without poll
    return bool(readable)


IDLE = TransactionStatus.IDLE


Driver = psycopg.Connection[Any] | psycopg.AsyncConnection[Any]


def sound(driver: Driver) -> bool:
    """Open, not broken, and idle: fit to keep after a call."""
    return not driver.broken and not driver.closed and driver.pgconn.transaction_status == IDLE


def usable(driver: Driver) -> bool:
    """Sound, and nothing unread (an ended session makes its socket readable): fit to use.

    The one liveness check, with no round trip: held connections before each
    use, and both pools' connections at checkout.
    """
    if not sound(driver):
        return False
    try:
        return not has_pending_input(driver.fileno())
    except (OSError, ValueError, psycopg.Error):
        return False


class Held(NamedTuple):
    """A held pool connection and psycopg's connection under it (read once, not per call)."""

    fairy: PoolProxiedConnection
    driver: psycopg.Connection[Any]


class HeldConnections:
    """Up to ``size`` connections of ``pool``, in autocommit, handed out one caller at a time.

    Thread-safe. After a fork the child drops the parent's connections
    unclosed (their sockets are the parent's) and holds its own.
    """

    def __init__(self, pool: Pool, size: int = HELD) -> None:
        self._pool = pool
        self._size = size
        self._idle: list[Held] = []
        self._parents: list[Held] = []  # in a forked child: the parent's, untouched
        self._held = 0
        self._closed = False
        self._pid = os.getpid()
        self._lock = threading.Lock()

    def take(self) -> Held | None:
        """A checked connection in autocommit, or None: all are busy (or closed), use the pool."""
        while True:
            with self._lock:
                if self._pid != os.getpid():
                    # Kept, never collected: a collected fairy would go back to the child's pool.
                    self._parents.extend(self._idle)
                    self._idle, self._held, self._pid = [], 0, os.getpid()
                if self._idle:
                    held = self._idle.pop()
                elif self._closed or self._held >= self._size:
                    return None
                else:
                    self._held += 1
                    break
            if usable(held.driver):
                return held
            self._drop(held, invalidate=True)
        try:
            fairy = self._pool.connect()
        except BaseException:
            with self._lock:
                self._held -= 1
            raise
        driver: psycopg.Connection[Any] = fairy.driver_connection  # type: ignore[assignment]
        try:
            driver.autocommit = True
        except BaseException:
            self._drop(Held(fairy, driver), invalidate=True)
            raise
        return Held(fairy, driver)

    def give_back(self, held: Held) -> None:
        """Keep it for the next call if it is still sound; otherwise back to the pool, or invalidated."""
        fit = sound(held.driver)
        with self._lock:
            if fit and not self._closed and self._pid == os.getpid():
                self._idle.append(held)
                return
        self._drop(held, invalidate=not fit)

    def close(self) -> None:
        """Return the idle ones to the pool; busy ones go back when their call ends."""
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
        for held in idle:
            self._drop(held)

    def _drop(self, held: Held, *, invalidate: bool = False) -> None:
        with self._lock:
            forked = self._pid != os.getpid()
            if not forked:
                self._held -= 1
        if forked:
            return  # the parent's connection: neither closed nor returned from here
        if invalidate:
            held.fairy.invalidate()  # the pool opens a new one when it is next short
            return
        try:
            held.driver.autocommit = False  # as the pool expects its connections back
        except psycopg.Error:
            held.fairy.invalidate()
            return
        held.fairy.close()
