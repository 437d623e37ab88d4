"""The connection layer: engine, pooled-connection liveness, transactions, and the runner.

This is the only module that executes SQL. The store's operations
(:mod:`taskqueue.store`) yield requests; :meth:`Database.run` takes a
connection in the transaction the caller asked for and performs them. An
asyncio runner needs only its own copy of this module's I/O, none of the
statements, validation or mapping.
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, Literal, TypeAlias, TypeVar

import psycopg
import psycopg.errors
import psycopg.sql
import sqlalchemy as sa
from psycopg.rows import dict_row, tuple_row
from sqlalchemy.engine import Connection

if TYPE_CHECKING:  # the ORM costs ~40 ms to import; a Session can only exist once it is loaded
    from sqlalchemy.orm import Session

from .cursors import Cursors, reused
from .dberrors import database_error, driver_error
from .dsn import to_sqlalchemy_url
from .errors import ValidationError
from .held import HELD, HeldConnections, usable
from .jsonb import use_fast_loads
from .schema import schema_path
from .sql import STATEMENTS
from .store.requests import Copy, Op, Query, Request

T = TypeVar("T")

#: How :meth:`Database.run` holds its connection:
#: transaction - one transaction, committed on success (or the caller's, left open);
#: autocommit - for an operation of one statement: no BEGIN/COMMIT on our own connection;
#: snapshot - one REPEATABLE READ transaction (our own connection only);
#: rollback - our own connection, and nothing the operation did is kept.
Mode = Literal["transaction", "autocommit", "snapshot", "rollback"]

#: A caller's connection: a SQLAlchemy Connection or Session, or None for one of ours.
Connectable: TypeAlias = "Connection | Session | None"

_TEXT = {name: sa.text(sql) for name, sql in STATEMENTS.items() if not sql.startswith("COPY")}


def _pyformat(sql: str) -> str:
    """A named statement in psycopg's own parameter style (``:name`` to ``%(name)s``).

    Textual, like SQLAlchemy's own parsing of text(): fit only for statements
    with no ``:word`` inside a string literal, which DRIVER's are checked for
    by test_store_driver_statements_have_no_literal_colons.
    """
    return re.sub(r"(?<![:\w]):([A-Za-z_]\w*)", r"%(\1)s", sql.replace("%", "%%"))


#: Statements run on the driver connection directly, as prepared statements. A
#: single enqueue is a few hundred microseconds of server time, and
#: SQLAlchemy's execute path adds about a third to it; these skip that layer,
#: never the pool or transaction. The worker's hot path (claim, batched
#: completion, batched heartbeat) is here for the same reason: per batch,
#: SQLAlchemy's row mapping cost more than the statements' server time. So is
#: a single claim's end (complete, fail, heartbeat, release): a claim +
#: complete loop spent a quarter of its time in that layer.
DRIVER_STATEMENTS = (
    "enqueue_task", "claim_tasks", "complete_tasks", "heartbeat_tasks",
    "complete_task", "complete_task_alone", "complete_task_pooled", "fail_task", "heartbeat_task", "requeue_task",
)

#: Every named statement in psycopg's parameter style: the asyncio runner
#: (:mod:`taskqueue.aio.db`) runs them all on the driver, and this one the DRIVER few.
PYFORMAT = {name: _pyformat(sql) for name, sql in STATEMENTS.items() if not sql.startswith("COPY")}
DRIVER = {name: PYFORMAT[name] for name in DRIVER_STATEMENTS}
_SET_LOCAL_SEARCH_PATH = PYFORMAT["set_local_search_path"]


# -- engine and liveness ------------------------------------------------------
def configure_engine(engine: sa.Engine, schema: str, *, poll_only: bool = False) -> None:
    """Every pooled connection starts with search_path = the queue schema, and is checked on checkout.

    ``poll_only`` (PgBouncer in transaction mode): a session setting would land
    on whichever server connection served it, so the search_path is set at the
    start of every transaction instead, and lasts only for it.

    The checkout check is a pre-ping without the round trip. An idle pooled
    connection has nothing to read: it does not LISTEN, and runs nothing. A
    server that ended the session (pg_terminate_backend, restart, shutdown,
    idle_session_timeout) sends its error and closes the socket, which makes
    it readable, so such a connection is replaced before use. A single enqueue
    is one round trip; a ping per checkout added about a sixth to its time.
    A connection opened before a fork is the parent's: a child that checks it
    out drops it unclosed and opens its own.
    """
    path = schema_path(schema)

    @sa.event.listens_for(engine, "checkout")
    def _check_alive(dbapi_connection: Any, record: Any, proxy: Any) -> None:
        pid = os.getpid()
        if record.info.get("pid", pid) != pid:
            # Opened before a fork: the socket is the parent's. Dropped unclosed, and replaced.
            record.dbapi_connection = proxy.dbapi_connection = None
            raise sa.exc.DisconnectionError("connection opened by the parent process")
        if not usable(dbapi_connection):
            raise sa.exc.DisconnectionError("connection closed, broken, or ended by the server")

    @sa.event.listens_for(engine, "connect")
    def _fast_json(dbapi_connection: Any, record: Any) -> None:
        record.info["pid"] = os.getpid()
        use_fast_loads(dbapi_connection)

    if poll_only:

        @sa.event.listens_for(engine, "begin")
        def _set_local_search_path(conn: Connection) -> None:
            driver = conn.connection.driver_connection
            assert driver is not None
            driver.execute(_SET_LOCAL_SEARCH_PATH, {"path": path})

        return

    @sa.event.listens_for(engine, "connect")
    def _set_search_path(dbapi_connection: Any, _record: Any) -> None:
        with dbapi_connection.cursor() as cur:
            cur.execute(PYFORMAT["set_search_path"], {"path": path})
        dbapi_connection.commit()


def held_as(mode: Mode, poll_only: bool) -> Mode:
    """The mode a connection is really held in: behind PgBouncer (poll_only) the search_path is set per
    transaction, so even a one-statement call needs one."""
    return "transaction" if poll_only and mode == "autocommit" else mode


def connect_args(poll_only: bool = False) -> dict[str, Any]:
    """psycopg's connect arguments; ``poll_only`` (PgBouncer in transaction mode) turns prepared statements off."""
    args: dict[str, Any] = {"application_name": "taskqueue", "connect_timeout": 10}
    if poll_only:
        args["prepare_threshold"] = None
    return args


def create_engine(
    dsn: str, schema: str, *, pool_size: int = 5, max_overflow: int = 10, poll_only: bool = False, **kwargs: Any
) -> sa.Engine:
    engine = sa.create_engine(
        to_sqlalchemy_url(dsn),
        pool_size=pool_size,
        max_overflow=max_overflow,
        connect_args=connect_args(poll_only),
        **kwargs,
    )
    configure_engine(engine, schema, poll_only=poll_only)
    return engine


def execute_script(connection: Connection, text: str) -> None:
    """Run a migration's SQL file as-is through the driver: PL/pgSQL text (%ROWTYPE, :=) is no template."""
    with connection.connection.driver_connection.cursor() as cur:  # type: ignore[union-attr]
        cur.execute(text)


#: A LISTEN connection: raw psycopg, autocommit, outside any pool (LISTEN belongs to the session), with TCP
#: keepalives so a half-open connection is noticed in about 25 s rather than never.
LISTEN_CONNECT_ARGS: dict[str, Any] = {
    "autocommit": True,
    "application_name": "taskqueue-listener",
    "connect_timeout": 10,
    "keepalives": 1,
    "keepalives_idle": 10,
    "keepalives_interval": 5,
    "keepalives_count": 3,
}


def listen_statement(channel: str) -> psycopg.sql.Composed:
    """LISTEN on a wake-up channel (identifier-quoted), for a connection made with LISTEN_CONNECT_ARGS."""
    return psycopg.sql.SQL("LISTEN {}").format(psycopg.sql.Identifier(channel))


def listen(pg_conn: psycopg.Connection[Any], channel: str) -> None:
    pg_conn.execute(listen_statement(channel))


# -- performing requests ------------------------------------------------------
def _perform(conn: Connection, request: Request, own: bool = False) -> Any:
    if isinstance(request, Copy) or (isinstance(request, Query) and request.name in DRIVER):
        driver = conn.connection.driver_connection
        assert driver is not None
        return _perform_raw(driver, request, own=own)
    if not isinstance(request, Query):
        raise TypeError(f"not a store request: {request!r}")
    result = conn.execute(_TEXT[request.name], dict(request.params))
    fetch = request.fetch
    if fetch == "rows":
        return list(result.mappings())
    if fetch == "tuples":
        return [tuple(r) for r in result]
    if fetch == "first":
        return result.mappings().first()
    if fetch == "scalar":
        return result.scalar()
    if fetch == "rowcount":
        return result.rowcount
    result.close()
    return None


def _perform_raw(driver: psycopg.Connection[Any], request: Request, *, own: bool = False) -> Any:
    """One request on psycopg's connection itself: every statement in its pyformat text, the hot ones prepared.

    ``own``: the connection is ours (held or pooled), so the hot statements reuse its cursors.
    """
    if isinstance(request, Query):
        sql = DRIVER.get(request.name)
        if sql is None:
            return _perform_on_driver(driver, PYFORMAT[request.name], request, None)
        if own:
            return _perform_on_cursors(reused(driver), sql, request, prepare_flag(driver))
        return _perform_on_driver(driver, sql, request, prepare_flag(driver))
    if isinstance(request, Copy):
        with driver.cursor() as cursor, cursor.copy(STATEMENTS[request.name]) as copy:
            write = copy.write_row
            for row in request.rows:
                write(row)
        return None
    raise TypeError(f"not a store request: {request!r}")


def prepare_flag(driver: psycopg.Connection[Any] | psycopg.AsyncConnection[Any]) -> bool | None:
    """Prepare a hot statement at once, unless the connection never prepares (poll_only: PgBouncer)."""
    return None if driver.prepare_threshold is None else True


def _perform_on_driver(driver: psycopg.Connection[Any], sql: str, request: Query, prepare: bool | None) -> Any:
    fetch = request.fetch
    with driver.cursor(row_factory=dict_row if fetch == "rows" or fetch == "first" else tuple_row) as cur:
        cur.execute(sql, request.params, prepare=prepare)
        return _result(cur, fetch)


def _perform_on_cursors(cursors: Cursors, sql: str, request: Query, prepare: bool | None) -> Any:
    """As :func:`_perform_on_driver`, on the connection's reused cursors (:mod:`taskqueue.cursors`)."""
    fetch = request.fetch
    cur: psycopg.Cursor[Any] = cursors.dicts if fetch == "rows" or fetch == "first" else cursors.tuples
    cur.execute(sql, request.params, prepare=prepare)
    return _result(cur, fetch)


def _result(cur: psycopg.Cursor[Any], fetch: str | None) -> Any:
    """What a request asked to fetch of its executed statement (dict rows for "rows" and "first", else tuples)."""
    if fetch == "rows" or fetch == "tuples":
        return cur.fetchall()
    if fetch == "first":
        return cur.fetchone()
    if fetch == "scalar":
        row = cur.fetchone()
        return None if row is None else row[0]
    if fetch == "rowcount":
        return cur.rowcount
    return None


def drive(conn: Connection, op: Op[T], request: Request | None = None, *, own: bool = False) -> T:
    """Perform the requests of ``op`` on ``conn`` until it returns; ``request`` is its first if already taken.

    ``own``: ``conn`` is one of ours, not a caller's (its hot statements reuse its cursors).
    """
    if request is None:
        try:
            request = next(op)
        except StopIteration as stop:
            return stop.value  # type: ignore[no-any-return]
    return _drive(lambda r: _perform(conn, r, own), op, request)


def _drive(perform: Callable[[Request], Any], op: Op[T], request: Request) -> T:
    while True:
        result = perform(request)
        try:
            request = op.send(result)
        except StopIteration as stop:
            return stop.value  # type: ignore[no-any-return]


class Database:
    """The engine of one queue schema, and the runner of store operations on it.

    Thread-safe: each run takes a pooled connection for one transaction.
    """

    def __init__(
        self, dsn: str, schema: str, *, pool_size: int = 5, max_overflow: int = 10, poll_only: bool = False
    ) -> None:
        self.schema = schema
        #: PgBouncer in transaction mode: no prepared statements, no session state, no autocommit shortcut.
        self.poll_only = poll_only
        self.engine = create_engine(dsn, schema, pool_size=pool_size, max_overflow=max_overflow, poll_only=poll_only)
        # Same pool; for work that is one statement, so it needs no BEGIN/COMMIT.
        self._autocommit_engine = self.engine.execution_options(isolation_level="AUTOCOMMIT")
        # One-statement calls skip the pool's checkout on a connection held for them; at least two are left
        # to the pool's other callers.
        self._held = HeldConnections(self.engine.pool, min(HELD, max(0, pool_size + max_overflow - 2)))

    def dispose(self) -> None:
        self._held.close()
        self.engine.dispose()

    def run(self, op: Op[T], connection: Connectable = None, *, mode: Mode = "transaction") -> T:
        """Run an operation: its validation first, then its requests on a connection held as ``mode`` says.

        A database error comes out as DatabaseError, raised from the driver's error.
        """
        try:
            request = next(op)
        except StopIteration as stop:  # answered without the database (or refused its input)
            return stop.value  # type: ignore[no-any-return]
        mode = held_as(mode, self.poll_only)
        try:
            if connection is None and mode == "autocommit":  # the single enqueue and other one-statement calls
                return self._autocommit(op, request)
            with self.connection(connection, mode) as conn:
                return drive(conn, op, request, own=connection is None)
        except (sa.exc.SQLAlchemyError, psycopg.Error) as exc:
            raise database_error(exc) from driver_error(exc) or exc

    def _autocommit(self, op: Op[T], request: Request) -> T:
        """A one-statement call below SQLAlchemy's Connection: on a held connection, else a pooled one.

        A held connection (:mod:`taskqueue.held`) skips the pool's checkout and
        check-in too. A pooled one skips the Connection object and its
        isolation-level switching, about a tenth of a single enqueue's time,
        and goes back to the pool in SQLAlchemy's default mode (no autocommit),
        as the pool expects.
        """
        held = self._held.take()
        if held is not None:
            try:
                return _drive(lambda r: _perform_raw(held.driver, r, own=True), op, request)
            finally:
                self._held.give_back(held)
        fairy = self.engine.pool.connect()
        try:
            driver: psycopg.Connection[Any] = fairy.driver_connection  # type: ignore[assignment]
            driver.autocommit = True
            try:
                return _drive(lambda r: _perform_raw(driver, r, own=True), op, request)
            finally:
                if not driver.closed and not driver.broken:
                    driver.autocommit = False
        finally:
            fairy.close()

    @contextlib.contextmanager
    def connection(self, connection: Connectable, mode: Mode = "transaction") -> Iterator[Connection]:
        """A connection held as ``mode`` says; a caller's connection stays in the caller's transaction."""
        mode = held_as(mode, self.poll_only)
        if connection is not None:
            if mode in ("snapshot", "rollback"):
                raise ValidationError("connection", f"cannot be given for this call ({mode} runs on its own)")
            with self.foreign(connection) as conn:
                yield conn
        elif mode == "transaction":
            with self.engine.begin() as conn:
                yield conn
        elif mode == "autocommit":
            with self._autocommit_engine.connect() as conn:
                yield conn
        elif mode == "snapshot":
            snapshot = self.engine.connect().execution_options(isolation_level="REPEATABLE READ")
            with snapshot as conn, conn.begin():
                yield conn
        else:
            with self.engine.connect() as conn:
                try:
                    yield conn
                finally:
                    conn.rollback()

    @contextlib.contextmanager
    def foreign(self, connection: Connection | Session) -> Iterator[Connection]:
        """Point a caller's connection at our schema for the duration, then restore it."""
        orm = sys.modules.get("sqlalchemy.orm")
        if orm is not None and isinstance(connection, orm.Session):
            conn = connection.connection()
        elif isinstance(connection, Connection):
            conn = connection
        else:
            raise ValidationError(
                "connection", f"must be a SQLAlchemy Connection or Session, got {type(connection).__name__}"
            )
        previous = conn.execute(_TEXT["show_search_path"]).scalar_one()
        conn.execute(_TEXT["set_local_search_path"], {"path": schema_path(self.schema)})
        aborted = False
        try:
            yield conn
        except (sa.exc.SQLAlchemyError, psycopg.Error):
            aborted = True  # the caller's transaction is aborted: a restore would only hide the error behind its own
            raise
        finally:
            if not aborted:
                conn.execute(_TEXT["set_local_search_path"], {"path": previous})
