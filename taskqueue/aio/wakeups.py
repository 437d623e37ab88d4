"""Wake-ups for an asyncio consumer: a NOTIFY on the queue's channel, or the poll interval, whichever is first.

The async twin of the worker's listener (:mod:`taskqueue.worker.listener`):
a dedicated autocommit connection outside the pool (LISTEN belongs to the
session), reconnected with backoff when it dies. Each (re)connection wakes
the consumer too, since notifications sent while it was gone are lost; the
timeout of :meth:`Wakeups.wait` is the poll fallback. With ``poll_only``
(PgBouncer in transaction mode, where LISTEN cannot work) it never
connects and every wait is the poll.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

import psycopg

from ..db import LISTEN_CONNECT_ARGS, listen_statement
from ..worker.listener import RECONNECT_MAX, RECONNECT_MIN

log = logging.getLogger("taskqueue.aio.wakeups")


class Wakeups:
    """``async with tq.wakeups() as wakeups: ... await wakeups.wait(5.0)``; see docs/async.md."""

    def __init__(self, dsn: str, channel: str, *, poll_only: bool = False) -> None:
        self.dsn = dsn
        self.channel = channel
        self.poll_only = poll_only
        #: How many times LISTEN was (re)established.
        self.connects = 0
        #: Set while LISTEN is established.
        self.listening = asyncio.Event()
        self._woken = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> Wakeups:
        if not self.poll_only:
            self._task = asyncio.create_task(self._listen(), name=f"taskqueue-wakeups:{self.channel}")
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def wait(self, timeout: float) -> bool:
        """Until a wake-up or ``timeout`` seconds; True if woken. Wake-ups meanwhile are merged into one."""
        try:
            await asyncio.wait_for(self._woken.wait(), timeout)
        except asyncio.TimeoutError:
            return False
        finally:
            self._woken.clear()
        return True

    async def _listen(self) -> None:
        delay = RECONNECT_MIN
        while True:
            try:
                conn = await psycopg.AsyncConnection.connect(self.dsn, **LISTEN_CONNECT_ARGS)
                async with conn:
                    await conn.execute(listen_statement(self.channel))
                    self.connects += 1
                    self.listening.set()
                    delay = RECONNECT_MIN
                    self._woken.set()  # what was sent while we were away is lost: look now
                    async for _notify in conn.notifies():
                        self._woken.set()
            except Exception as exc:  # a lost socket, and anything else: reconnect, never die quietly
                self.listening.clear()
                log.warning("LISTEN connection lost (%s); reconnecting in %.1f s",
                            str(exc).strip() or type(exc).__name__, delay)
                await asyncio.sleep(delay)
                delay = min(RECONNECT_MAX, delay * 2)
