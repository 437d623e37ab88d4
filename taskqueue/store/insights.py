"""Read-only views of a queue for the dashboard and the metrics, as sans-IO operations.

Statements: ``dashboard.sql``. Nothing here writes: the dashboard's actions
go through :class:`taskqueue.TaskQueue`. Rows become the value objects of
:mod:`taskqueue.insights` here.
"""

from __future__ import annotations

import time
from typing import Any

from ..insights import Group, Summary, WorkerLoad
from .requests import Op, Row, execute, rows, scalar


def summary() -> Op[Summary]:
    """Everything the overview and the metrics read; run it in one snapshot so the counts agree."""
    started = time.perf_counter()
    now = yield from scalar("snapshot_time")
    groups = [
        Group(r["queue"], r["state"], r["priority"], r["pool"], r["n"]) for r in (yield from rows("live_counts"))
    ]
    oldest = {r["queue"]: r["oldest_run_at"] for r in (yield from rows("oldest_waiting"))}
    per_minute = [0] * 60
    for r in (yield from rows("finished_per_minute")):
        if 0 <= r["minute_ago"] < 60:
            per_minute[r["minute_ago"]] += r["n"]
    pools = [(r["name"], r["running_limit"], r["running"]) for r in (yield from rows("pool_rows"))]
    # Lease holders, for workers outside the registry (claims made through
    # the API by a program of the user's own): what they hold, capacity unknown.
    holders = [WorkerLoad(r["worker"], None, r["required"], r["tasks"]) for r in (yield from running_by_worker())]
    return Summary(now, groups, oldest, per_minute, pools, holders, time.perf_counter() - started)


def pool_waiting() -> Op[dict[str, int]]:
    return {r["pool"]: r["n"] for r in (yield from rows("pool_waiting"))}


def browse(filters: dict[str, Any], before_id: int | None, limit: int, timeout_ms: int) -> Op[list[Row]]:
    """One page of the task list; the statement gives up after ``timeout_ms`` (run it in a transaction)."""
    yield from execute("limit_browse_time", timeout=f"{int(timeout_ms)}ms")
    return (yield from rows("browse_tasks", **filters, before_id=before_id, limit=limit))


def failure_groups(limit: int) -> Op[list[Row]]:
    return (yield from rows("failure_groups", limit=limit))


def failure_members(kind: str, fingerprint: str, before_id: int | None, limit: int) -> Op[list[Row]]:
    return (yield from rows("failure_group_members", kind=kind, fingerprint=fingerprint, before_id=before_id,
                            limit=limit))


def running_by_worker() -> Op[list[Row]]:
    return (yield from rows("running_by_worker"))
