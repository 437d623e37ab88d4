"""What the store asks the connection layer to do: requests, and the shape of an operation.

An operation is a generator: it yields requests, receives each one's result,
and returns its own typed result. It never touches a connection, so the one
sync runner (:mod:`taskqueue.db`) and an asyncio runner execute the very same
operations; statements, validation and result mapping exist once.

Code before an operation's first ``yield`` runs before any connection is
taken: validation goes there, so bad input is refused before anything is
written (and before a pool connection is checked out).
"""

from __future__ import annotations

from collections.abc import Generator, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar

from ..sql import STATEMENTS

T = TypeVar("T")

#: How a query's result comes back to the operation:
#: rows -> list of mappings; tuples -> list of tuples in the statement's column
#: order (the claim: no dict per row); first -> a mapping or None; scalar ->
#: first column of the first row or None; rowcount -> rows affected; none -> None.
Fetch = Literal["rows", "tuples", "first", "scalar", "rowcount", "none"]

Row = Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class Query:
    """Run the named statement of ``taskqueue/sql/*.sql`` with bound parameters."""

    name: str
    params: Mapping[str, Any] = field(default_factory=dict)
    fetch: Fetch = "rows"

    def __post_init__(self) -> None:
        if self.name not in STATEMENTS:
            raise KeyError(f"no statement named {self.name!r} in taskqueue/sql")


@dataclass(frozen=True, slots=True)
class Copy:
    """COPY rows into a table with the named ``COPY ... FROM STDIN`` statement; the result is None."""

    name: str
    rows: Iterable[Sequence[Any]]

    def __post_init__(self) -> None:
        if self.name not in STATEMENTS:
            raise KeyError(f"no statement named {self.name!r} in taskqueue/sql")


Request = Query | Copy

#: An operation returning ``T``.
Op = Generator[Request, Any, T]


def rows(statement: str, /, **params: Any) -> Op[list[Row]]:
    """The rows of one statement (``yield from rows(...)`` inside an operation)."""
    result: list[Row] = yield Query(statement, params, "rows")
    return result


def tuples(statement: str, /, **params: Any) -> Op[list[tuple[Any, ...]]]:
    """The rows of one statement as tuples, in its column order."""
    result: list[tuple[Any, ...]] = yield Query(statement, params, "tuples")
    return result


def first(statement: str, /, **params: Any) -> Op[Row | None]:
    result: Row | None = yield Query(statement, params, "first")
    return result


def scalar(statement: str, /, **params: Any) -> Op[Any]:
    return (yield Query(statement, params, "scalar"))


def rowcount(statement: str, /, **params: Any) -> Op[int]:
    result: int = yield Query(statement, params, "rowcount")
    return result


def execute(statement: str, /, **params: Any) -> Op[None]:
    yield Query(statement, params, "none")


def done(value: T) -> Op[T]:
    """An operation that needs no database (its result is known from the input alone)."""
    return value
    yield  # pragma: no cover - makes this a generator
