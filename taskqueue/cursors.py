"""Cursors kept on each of our own psycopg connections, reused for its hot statements.

Why: ``conn.cursor()`` builds a cursor and its adapters map for every
statement. For a claim of one task and its completion through bare psycopg
that was 30% of the client's instructions (callgrind: 357k against 251k a
claim + complete with the cursors reused, ``python -m bench
client_instructions``; docs/performance.md, "The client's share of a task,
and reused cursors"), and with 8 consumers on two cores the client's CPU is
a third of what a task costs. A connection runs one statement at a time and
a cursor may run many, one after another, so one cursor per row shape per
connection is enough. They are kept on the connection object itself and go
with it.

Only the hot statements (``DRIVER_STATEMENTS``: small results) use them, and
only on connections of our own: a cursor keeps its last result until its next
statement, and a caller's connection may be shared in ways we cannot see.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import psycopg
from psycopg.rows import DictRow, TupleRow, dict_row, tuple_row

_ATTR = "_taskqueue_cursors"


class Cursors(NamedTuple):
    """One connection's cursors: rows as tuples (also scalars and row counts), and as dicts."""

    tuples: psycopg.Cursor[TupleRow]
    dicts: psycopg.Cursor[DictRow]


class AsyncCursors(NamedTuple):
    tuples: psycopg.AsyncCursor[TupleRow]
    dicts: psycopg.AsyncCursor[DictRow]


def reused(driver: psycopg.Connection[Any]) -> Cursors:
    """The connection's own cursors, made on its first hot statement."""
    return _kept(driver, Cursors)  # type: ignore[no-any-return]


def reused_async(driver: psycopg.AsyncConnection[Any]) -> AsyncCursors:
    """The async connection's own cursors, made on its first hot statement."""
    return _kept(driver, AsyncCursors)  # type: ignore[no-any-return]


def _kept(driver: Any, make: Any) -> Any:
    found = getattr(driver, _ATTR, None)
    if found is None:
        found = make(driver.cursor(row_factory=tuple_row), driver.cursor(row_factory=dict_row))
        setattr(driver, _ATTR, found)
    return found
