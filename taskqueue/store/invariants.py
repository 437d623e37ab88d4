"""The invariant views read in one snapshot, and the repairs, as operations.

Statements: ``invariants.sql`` and ``admin.sql`` (database_now). The report
types and their meaning live in :mod:`taskqueue.invariants`; this module only
reads and writes.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any

from .requests import Op, execute, first, rows

#: Longest wait for a lock during a repair; below PostgreSQL's deadlock_timeout (1 s).
REPAIR_LOCK_TIMEOUT_MS = 200


@dataclass(frozen=True, slots=True)
class Snapshot:
    """The rows of every check, read at ``checked_at``."""

    checked_at: dt.datetime
    found: dict[str, list[dict[str, Any]]]


@dataclass(frozen=True, slots=True)
class RepairRows:
    """What each repair statement changed."""

    cleared_leases: list[tuple[int, str]]
    expired_leases: list[int]
    promoted: list[int]
    unqueued: list[tuple[int, str]]
    unparked: list[tuple[int, str | None]]
    recounted: list[tuple[str, int, int]]


def read_checks(checks: list[str]) -> Op[Snapshot]:
    """The rows of the named invariant views (run it in one REPEATABLE READ snapshot)."""
    now = yield from first("database_now")
    assert now is not None
    found: dict[str, list[dict[str, Any]]] = {}
    for check in checks:
        found[check] = [dict(r) for r in (yield from rows(f"check_{check}"))]
    return Snapshot(now["now"], found)


def repair() -> Op[RepairRows]:
    """Task rows first, pool rows last (all of them, in name order), never waiting long for a lock."""
    yield from execute("set_local_lock_timeout", timeout=f"{REPAIR_LOCK_TIMEOUT_MS}ms")
    cleared = yield from rows("clear_finished_leases")
    expired = yield from rows("expire_leaseless_tasks")
    promoted = yield from rows("promote_overdue_scheduled")
    unqueued = yield from rows("unpark_unqueued_tasks")
    unparked = yield from rows("unpark_open_pool_tasks")
    yield from execute("ensure_pools_of_running_tasks")
    yield from execute("lock_all_pools")
    recounted = yield from rows("recount_pools")
    return RepairRows(
        cleared_leases=[(r["id"], r["state"]) for r in cleared],
        expired_leases=[r["id"] for r in expired],
        promoted=[r["id"] for r in promoted],
        unqueued=[(r["id"], r["state"]) for r in unqueued],
        unparked=[(r["id"], r["pool"]) for r in unparked],
        recounted=[(r["name"], r["stored"], r["running"]) for r in recounted],
    )
