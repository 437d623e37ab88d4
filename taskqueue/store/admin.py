"""Counts for ``stats()``, pruning, and the next due time.

Statements: ``admin.sql`` and ``pools.sql`` (list_pools).
"""

from __future__ import annotations

from ..stats import PoolStats, Stats, WaitingGroup
from ..task import STATES, TaskState
from . import registry
from .pools import pools
from .requests import Op, first, rowcount, rows, scalar


def prune_finished(older_than: float, batch: int) -> Op[int]:
    return (yield from rowcount("prune_finished", older_than=older_than, batch=batch))


def next_run_in() -> Op[float | None]:
    seconds = yield from scalar("next_run_at")
    return None if seconds is None else float(seconds)


def stats(throughput_window: float = 60.0) -> Op[Stats]:
    by_state: dict[TaskState, int] = {s: 0 for s in STATES}
    for r in (yield from rows("count_by_state")):
        by_state[r["state"]] = r["n"]
    by_queue: dict[str, dict[TaskState, int]] = {}
    for r in (yield from rows("count_by_queue_state")):
        by_queue.setdefault(r["queue"], {s: 0 for s in STATES})[r["state"]] = r["n"]
    waiting = tuple(
        WaitingGroup(r["queue"], r["priority"], r["n"], float(r["oldest_wait_seconds"] or 0.0))
        for r in (yield from rows("count_waiting_by_queue_priority"))
    )
    parked = {r["pool"]: r["n"] for r in (yield from rows("count_parked_by_pool"))}
    finished = yield from scalar("count_finished_since", seconds=throughput_window)
    now = yield from first("database_now")
    assert now is not None
    return Stats(
        by_state=by_state,
        by_queue=by_queue,
        waiting_by_priority=waiting,
        oldest_waiting_seconds=max((w.oldest_wait_seconds for w in waiting), default=0.0),
        pools=tuple(PoolStats(p.name, p.limit, p.running, parked.get(p.name, 0)) for p in (yield from pools())),
        parked=sum(parked.values()),
        throughput_per_second=finished / throughput_window,
        total=sum(by_state.values()),
        database_time=now["now"],
        workers=tuple((yield from registry.workers())),
    )
