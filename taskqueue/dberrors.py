"""Which database errors mean what: the typed DatabaseError a caller sees, and which ones a retry gets past.

The runners (:mod:`taskqueue.db`, :mod:`taskqueue.aio.db`) raise what
:func:`database_error` makes of a driver's error; the worker and the
invariant check ask :func:`transient` and :func:`lock_transient` whether to
try again. No SQL runs here.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import psycopg
import psycopg.errors
import sqlalchemy as sa

from .errors import DatabaseError, SchemaMissing

_SCHEMA_MISSING = (psycopg.errors.UndefinedTable, psycopg.errors.UndefinedFunction, psycopg.errors.InvalidSchemaName)


def database_error(exc: BaseException) -> DatabaseError:
    """The DatabaseError for a driver error (or SQLAlchemy's around one); raise it ``from driver_error(exc)``."""
    cause = driver_error(exc) or exc
    lines = [line.strip() for line in str(cause).strip().splitlines() if line.strip()]
    detail = lines[0] if lines else type(cause).__name__
    sqlstate: str | None = getattr(cause, "sqlstate", None)
    if isinstance(cause, _SCHEMA_MISSING):
        return SchemaMissing(
            f"the queue schema is missing or out of date in this database; run `taskqueue migrate` first ({detail})",
            transient=False,
            sqlstate=sqlstate,
        )
    if isinstance(cause, psycopg.OperationalError) and (sqlstate is None or sqlstate[:2] in ("08", "57")):
        message = f"cannot reach the database: {detail}"
    else:
        message = f"database error: {detail}"
    return DatabaseError(message, transient=transient(exc), sqlstate=sqlstate)


@contextlib.contextmanager
def translated() -> Iterator[None]:
    """Database errors inside the block become DatabaseError (for work that is not an operation: migrate)."""
    try:
        yield
    except (sa.exc.SQLAlchemyError, psycopg.Error) as exc:
        raise database_error(exc) from driver_error(exc) or exc


def driver_error(exc: BaseException) -> BaseException | None:
    """The driver's own error behind ``exc`` (through SQLAlchemy's wrapper and ``raise ... from``), if any."""
    seen: BaseException | None = exc
    for _ in range(5):
        if seen is None or isinstance(seen, psycopg.Error):
            return seen
        seen = getattr(seen, "orig", None) or seen.__cause__
    return None


def lock_transient(exc: BaseException) -> bool:
    """A lock wait given up or a deadlock: the transaction can simply run again."""
    return isinstance(driver_error(exc), (psycopg.errors.LockNotAvailable, psycopg.errors.DeadlockDetected))


def transient(exc: BaseException) -> bool:
    """A database error that a fresh attempt can get past: a lost connection, a serialization failure, a deadlock.

    psycopg files all of these under OperationalError (serialization failures
    and deadlocks as TransactionRollback).
    """
    if isinstance(exc, DatabaseError):
        return exc.transient
    if isinstance(exc, sa.exc.DBAPIError) and exc.connection_invalidated:
        return True
    return isinstance(driver_error(exc), psycopg.OperationalError)
