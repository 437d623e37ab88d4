"""The one BEFORE UPDATE trigger on pools (migration 0061) does what the two it replaced did.

mark_freed_on_free_slot and reopen_on_free_slot each had a WHEN condition,
which PostgreSQL 15 prepares again in every statement that updates pools:
every claim and completion of a pooled task. on_pool_room keeps only the
part both shared and tests the rest in its function. These tests pin, over a
grid of old and new pool rows, that freed_at and the unparking happen
exactly when the old conditions said, and that a claim's update of a pool
with room, the common case, calls no trigger function at all.
"""

from __future__ import annotations

import itertools
from typing import Any

import psycopg
import pytest

from taskqueue import TaskQueue

LIMITS = (None, 2)
RUNNING = (0, 1, 2, 3)
CHANGES = ("take", "give", "no limit", "limit 4", "limit 1", "rename")


def _new_row(limit: int | None, running: int, change: str) -> tuple[int | None, int, bool]:
    """(limit, running, renamed) after ``change``."""
    if change == "take":
        return limit, running + 1, False
    if change == "give":
        return limit, running - 1, False
    if change == "no limit":
        return None, running, False
    if change == "rename":
        return limit, running, True
    return int(change.split()[1]), running, False


def _expected(old_limit: int | None, old_running: int, old_open: bool, change: str) -> dict[str, Any]:
    """What mark_freed_on_free_slot and reopen_on_free_slot (pool_triggers.v2) did, from their WHEN conditions."""
    limit, running, renamed = _new_row(old_limit, old_running, change)
    freed = old_limit is not None and old_running >= old_limit and (limit is None or running < limit)
    reopen = old_limit is not None and (old_running >= old_limit or old_open) and (
        limit is None or renamed or (running < limit and limit - running > max(old_limit - old_running, 0))
    )
    called = old_limit is not None and (old_running >= old_limit or old_open)
    return {"freed": freed, "unparks": 1 if reopen else 0, "parked_open": False if reopen else old_open,
            "called": 1 if called else 0}


CASES = [
    (limit, running, parked_open, change)
    for limit, running, parked_open, change in itertools.product(LIMITS, RUNNING, (False, True), CHANGES)
    if not (change == "give" and running == 0)
]


def _run(dsn: str, name: str, old: tuple[int | None, int, bool], change: str) -> dict[str, Any]:
    limit, running, parked_open = old
    with psycopg.connect(dsn) as conn:
        conn.execute("INSERT INTO taskqueue.pools (name, running_limit, running, parked_open) VALUES (%s, %s, %s, %s)",
                     (name, limit, running, parked_open))
        conn.commit()
        conn.execute("SET LOCAL track_functions = 'all'")
        new_limit, new_running, renamed = _new_row(limit, running, change)
        row = conn.execute(
            "UPDATE taskqueue.pools SET running_limit = %s, running = %s, name = %s WHERE name = %s"
            " RETURNING freed_at IS NOT NULL, parked_open",
            (new_limit, new_running, name + "-renamed" if renamed else name, name),
        ).fetchone()
        calls = dict(conn.execute(
            "SELECT funcname, calls FROM pg_stat_xact_user_functions"
            " WHERE schemaname = 'taskqueue' AND funcname IN ('pool_room_changed', 'unpark_behind')"
        ).fetchall())
        conn.commit()
    assert row is not None
    return {"freed": row[0], "unparks": calls.get("unpark_behind", 0), "parked_open": row[1],
            "called": calls.get("pool_room_changed", 0)}


def test_pools_has_one_update_trigger(dsn: str) -> None:
    with psycopg.connect(dsn) as conn:
        names = conn.execute(
            "SELECT tgname FROM pg_trigger WHERE tgrelid = 'taskqueue.pools'::regclass AND NOT tgisinternal"
            " AND tgtype & 16 = 16 ORDER BY tgname"  # TRIGGER_TYPE_UPDATE
        ).fetchall()
    assert [n[0] for n in names] == ["on_pool_room"]


def test_the_trigger_does_what_the_two_conditions_said(dsn: str) -> None:
    """Every case of the grid: freed_at, unpark_behind and parked_open as the old triggers had them."""
    mismatches = []
    for i, (limit, running, parked_open, change) in enumerate(CASES):
        got = _run(dsn, f"grid-{i}", (limit, running, parked_open), change)
        want = _expected(limit, running, parked_open, change)
        if got != want:
            mismatches.append(((limit, running, parked_open, change), got, want))
    assert mismatches == []
    assert len(CASES) == 92


@pytest.mark.parametrize("limit", [None, 5])
def test_a_claim_and_completion_in_a_pool_with_room_call_no_trigger_function(tq: TaskQueue, dsn: str,
                                                                             limit: int | None) -> None:
    """The common case: a pool with room (or no limit) takes and gives back a slot with no function call."""
    if limit is not None:
        tq.set_pool_limit("net", limit)
    tq.enqueue("a", pool="net")
    task = tq.claim()
    assert task is not None and task.pool == "net"
    with psycopg.connect(dsn) as conn:
        conn.execute("SET LOCAL track_functions = 'all'")
        conn.execute("UPDATE taskqueue.pools SET running = running + 1 WHERE name = 'net'")  # as a claim takes it
        conn.execute("UPDATE taskqueue.pools SET running = running - 1 WHERE name = 'net'")  # and a release
        calls = conn.execute("SELECT count(*) FROM pg_stat_xact_user_functions WHERE funcname = 'pool_room_changed'"
                             ).fetchone()
        conn.rollback()
    assert calls == (0,)
    tq.complete(task)
    assert tq.pool("net").running == 0  # type: ignore[union-attr]
    assert tq.check().ok
