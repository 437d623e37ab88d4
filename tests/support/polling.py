"""Bounded polling and one-shot SQL for tests that watch a worker from outside."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import psycopg

WAIT = 10.0


def wait_for(predicate: Callable[[], Any], timeout: float = WAIT, interval: float = 0.02) -> bool:
    """Poll until ``predicate()`` is true or ``timeout`` passes; return its last verdict."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(interval)
    return bool(predicate())


def sql(dsn: str, statement: str, *params: Any) -> list[tuple[Any, ...]]:
    """Run one statement in its own autocommit connection; rows if it returns any."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        cur = conn.execute(statement, params)
        return cur.fetchall() if cur.description else []
