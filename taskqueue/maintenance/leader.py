"""Elects one maintenance leader per queue schema with a session advisory lock.

The lock lives on a dedicated connection (not a pooled one, which would carry
the lock into unrelated work and could be recycled). PostgreSQL frees it when
that session ends, so a killed leader is replaced by the next worker that
tries. A frozen leader (SIGSTOP, a stalled VM) keeps its socket open, so the
session also carries ``idle_session_timeout`` (PostgreSQL 14+): the live
leader touches it every round, a frozen one loses it after that long.
"""

from __future__ import annotations

import hashlib
import logging

import sqlalchemy as sa
from sqlalchemy.pool import NullPool

from ..db import drive
from ..dsn import to_sqlalchemy_url
from ..queue import TaskQueue
from ..store import leader as lock_ops

log = logging.getLogger("taskqueue.worker.maintenance")


def leader_key(schema: str) -> int:
    """A stable signed 64-bit advisory-lock key per queue schema."""
    digest = hashlib.blake2b(f"taskqueue.maintenance:{schema}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)


class Leader:
    """Holds (or tries to take) the maintenance lock of one queue schema."""

    def __init__(self, tq: TaskQueue, *, worker: str, idle_timeout: float = 10.0) -> None:
        self.tq = tq
        self.worker = worker
        self.idle_timeout = idle_timeout
        self.key = leader_key(tq.schema)
        self._engine = sa.create_engine(
            to_sqlalchemy_url(tq.dsn),
            poolclass=NullPool,
            connect_args={"application_name": "taskqueue-leader", "connect_timeout": 10},
        )
        self._conn: sa.Connection | None = None  # the dedicated session, leader or candidate
        self._leader = False

    @property
    def is_leader(self) -> bool:
        return self._leader

    def ensure(self) -> bool:
        """Are we the leader now? Takes the lock if free, and checks it is still ours if held.

        Candidates keep their session open and simply try again next round, so
        a round costs one statement, not a new backend.
        """
        try:
            if self._conn is None:
                self._conn = self._connect()
            with self._conn.begin():
                if self._leader:
                    held = drive(self._conn, lock_ops.holds_advisory_lock(self.key))
                else:
                    held = drive(self._conn, lock_ops.try_advisory_lock(self.key))
        except Exception as exc:
            if self._leader:
                log.warning("maintenance leadership lost: %s", exc, extra={"worker": self.worker})
            self._drop()
            return False
        if held and not self._leader:
            log.info("became the maintenance leader", extra={"worker": self.worker})
        elif self._leader and not held:
            log.warning("maintenance leadership lost", extra={"worker": self.worker})
        self._leader = held
        return held

    def _connect(self) -> sa.Connection:
        conn = self._engine.connect()
        try:
            with conn.begin():
                drive(conn, lock_ops.set_idle_session_timeout(int(self.idle_timeout * 1000)))
        except sa.exc.DBAPIError as exc:
            # Before PostgreSQL 14: no such setting; a frozen leader then holds on until it resumes.
            log.debug("idle_session_timeout not available: %s", exc, extra={"worker": self.worker})
        return conn

    def _drop(self) -> None:
        conn, self._conn = self._conn, None
        self._leader = False
        if conn is not None:
            try:
                conn.invalidate()
                conn.close()
            except Exception:  # pragma: no cover - the connection is already gone
                pass

    def resign(self) -> None:
        """Give the lock up (closing the session frees it) so another worker can lead."""
        if self._leader and self._conn is not None:
            # Unlock first: closing alone frees it only once the server notices.
            try:
                with self._conn.begin():
                    drive(self._conn, lock_ops.advisory_unlock(self.key))
            except Exception:  # the session is gone, and its lock with it
                pass
            log.info("resigned maintenance leadership", extra={"worker": self.worker})
        self._drop()
        self._engine.dispose()
