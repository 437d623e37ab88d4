"""The asyncio runner: store operations performed on psycopg's ``AsyncConnection``.

The async twin of :mod:`taskqueue.db` holds only the I/O: the statements,
validation and result mapping are the same objects the sync runner uses.
It talks to psycopg directly, through ``psycopg_pool.AsyncConnectionPool``,
not through SQLAlchemy's asyncio layer: each statement crosses no greenlet
bridge and no row wrapper, and the pool checks liveness without a round
trip. A caller's SQLAlchemy ``AsyncConnection`` or ``AsyncSession`` is still
accepted: its psycopg connection is used inside the caller's transaction.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any, TypeVar

import psycopg
import psycopg.errors
import sqlalchemy as sa
from psycopg import AsyncConnection, AsyncCursor, IsolationLevel
from psycopg.rows import dict_row, tuple_row
from psycopg_pool import AsyncConnectionPool

from ..cursors import reused_async
from ..db import (
    DRIVER_STATEMENTS,
    PYFORMAT,
    Mode,
    connect_args,
    held_as,
    prepare_flag,
)
from ..dberrors import database_error, driver_error
from ..errors import ValidationError
from ..held import usable
from ..jsonb import use_fast_loads
from ..schema import schema_path
from ..sql import STATEMENTS
from ..store.requests import Copy, Op, Query, Request

T = TypeVar("T")

AsyncConn = AsyncConnection[Any]


async def _perform(conn: AsyncConn, request: Request, own: bool = False) -> Any:
    if isinstance(request, Copy):
        async with conn.cursor() as cur, cur.copy(STATEMENTS[request.name]) as copy:
            for row in request.rows:
                await copy.write_row(row)
        return None
    if not isinstance(request, Query):
        raise TypeError(f"not a store request: {request!r}")
    # The hot statements are prepared at once, the others after psycopg's threshold (never behind PgBouncer).
    hot = request.name in DRIVER_STATEMENTS
    prepared = prepare_flag(conn) if hot else None
    fetch = request.fetch
    sql = PYFORMAT[request.name]
    if hot and own:  # our own connection: its reused cursors (taskqueue.cursors)
        cursors = reused_async(conn)
        kept: AsyncCursor[Any] = cursors.tuples if fetch == "tuples" else cursors.dicts
        await kept.execute(sql, request.params, prepare=prepared)
        return await _result(kept, fetch)
    async with conn.cursor(row_factory=tuple_row if fetch == "tuples" else dict_row) as cur:
        await cur.execute(sql, request.params, prepare=prepared)
        return await _result(cur, fetch)


async def _result(cur: AsyncCursor[Any], fetch: str | None) -> Any:
    """What a request asked to fetch of its executed statement (rows as dicts, or as tuples for "tuples")."""
    if fetch == "rows" or fetch == "tuples":
        return await cur.fetchall()
    if fetch == "first":
        return await cur.fetchone()
    if fetch == "scalar":
        first = await cur.fetchone()
        return None if first is None else next(iter(first.values()))
    if fetch == "rowcount":
        return cur.rowcount
    return None


async def drive(conn: AsyncConn, op: Op[T], request: Request, *, own: bool = False) -> T:
    """Perform the requests of ``op`` on ``conn``, ``request`` (already taken) first, until it returns.

    ``own``: ``conn`` is one of ours, not a caller's (its hot statements reuse its cursors).
    """
    while True:
        result = await _perform(conn, request, own)
        try:
            request = op.send(result)
        except StopIteration as stop:
            return stop.value  # type: ignore[no-any-return]


class AsyncDatabase:
    """A pool of psycopg async connections to one queue schema, and the runner of operations on it.

    The pool is opened on first use, on the running event loop (or by ``open``).
    Its connections are in autocommit: a one-statement operation costs one
    round trip, and a transaction is an explicit BEGIN ... COMMIT.
    """

    def __init__(self, dsn: str, schema: str, *, pool_size: int = 5, max_overflow: int = 10,
                 poll_only: bool = False) -> None:
        self.schema = schema
        #: PgBouncer in transaction mode: no prepared statements and no session state (search_path per transaction).
        self.poll_only = poll_only
        kwargs: dict[str, Any] = {"autocommit": True, **connect_args(poll_only)}
        self.pool = AsyncConnectionPool(
            dsn, min_size=1, max_size=pool_size + max_overflow, kwargs=kwargs,
            configure=self._configure, check=self._check, open=False, name=f"taskqueue:{schema}",
        )
        self._opened = False

    async def _configure(self, conn: AsyncConn) -> None:
        use_fast_loads(conn)
        if not self.poll_only:  # behind PgBouncer the search_path is set per transaction instead
            await conn.execute(PYFORMAT["set_search_path"], {"path": schema_path(self.schema)})

    @staticmethod
    async def _check(conn: AsyncConn) -> None:
        """A pre-ping without the round trip; see :func:`taskqueue.db.configure_engine`."""
        if not usable(conn):
            await conn.close()  # closed, the pool replaces it rather than offering it again
            raise psycopg.OperationalError("the pooled connection is closed or its session ended")

    async def open(self) -> None:
        if not self._opened:
            self._opened = True
            await self.pool.open(wait=False)

    async def close(self) -> None:
        if self._opened:
            await self.pool.close()

    async def run(self, op: Op[T], connection: Any = None, *, mode: Mode = "transaction") -> T:
        """Run an operation: its validation first, then its requests on a connection held as ``mode`` says."""
        try:
            request = next(op)
        except StopIteration as stop:  # answered without the database (or refused its input)
            return stop.value  # type: ignore[no-any-return]
        try:
            async with self.connection(connection, mode) as conn:
                return await drive(conn, op, request, own=connection is None)
        except (sa.exc.SQLAlchemyError, psycopg.Error) as exc:
            raise database_error(exc) from driver_error(exc) or exc

    @contextlib.asynccontextmanager
    async def connection(self, connection: Any = None, mode: Mode = "transaction") -> AsyncIterator[AsyncConn]:
        """A connection held as ``mode`` says; a caller's connection stays in the caller's transaction."""
        if connection is not None:
            if mode in ("snapshot", "rollback"):
                raise ValidationError("connection", f"cannot be given for this call ({mode} runs on its own)")
            async with self.foreign(connection) as conn:
                yield conn
            return
        await self.open()
        mode = held_as(mode, self.poll_only)
        async with self.pool.connection() as conn:
            if mode == "autocommit":
                yield conn
                return
            await conn.set_isolation_level(IsolationLevel.REPEATABLE_READ if mode == "snapshot" else None)
            async with conn.transaction(force_rollback=mode == "rollback"):
                if self.poll_only:
                    await _perform(conn, Query("set_local_search_path", {"path": schema_path(self.schema)}, "none"))
                yield conn

    @contextlib.asynccontextmanager
    async def foreign(self, connection: Any) -> AsyncIterator[AsyncConn]:
        """The psycopg connection under a caller's AsyncConnection/AsyncSession, pointed at our schema meanwhile."""
        conn = await _driver_connection(connection)
        previous = await _perform(conn, Query("show_search_path", {}, "scalar"))
        await _perform(conn, Query("set_local_search_path", {"path": schema_path(self.schema)}, "none"))
        aborted = False
        try:
            yield conn
        except psycopg.Error:
            aborted = True  # the caller's transaction is aborted: a restore would only hide the error behind its own
            raise
        finally:
            if not aborted:
                await _perform(conn, Query("set_local_search_path", {"path": previous}, "none"))


async def _driver_connection(connection: Any) -> AsyncConn:
    """The psycopg AsyncConnection behind a SQLAlchemy AsyncConnection or AsyncSession."""
    try:
        from sqlalchemy.ext.asyncio import AsyncConnection as SAConnection
        from sqlalchemy.ext.asyncio import AsyncSession
    except ImportError:  # pragma: no cover - SQLAlchemy's asyncio extension needs greenlet
        SAConnection = AsyncSession = ()  # type: ignore[assignment,misc]
    if isinstance(connection, AsyncSession):
        connection = await connection.connection()
    if not isinstance(connection, SAConnection):
        raise ValidationError(
            "connection", f"must be a SQLAlchemy AsyncConnection or AsyncSession, got {type(connection).__name__}"
        )
    raw = (await connection.get_raw_connection()).driver_connection
    if not isinstance(raw, AsyncConnection):
        raise ValidationError(
            "connection", f"must use the psycopg driver (postgresql+psycopg://), not {type(raw).__name__}"
        )
    return raw
