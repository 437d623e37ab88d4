"""What ``TaskQueue.stats()`` returns: frozen, typed counts an editor can complete."""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .task import TaskState, WorkerInfo


@dataclass(frozen=True, slots=True)
class WaitingGroup:
    """Tasks waiting to be claimed in one (queue, priority)."""

    queue: str
    priority: int
    waiting: int
    oldest_wait_seconds: float


@dataclass(frozen=True, slots=True)
class PoolStats:
    """A pool with a limit or running tasks, and its parked tasks (queued while it is full)."""

    name: str
    limit: int | None
    running: int
    parked: int


@dataclass(frozen=True, slots=True)
class Stats:
    """Counts by state (every state, zeros included), by queue and priority; pools; throughput.

    A scheduled task whose run_at has passed counts as queued. Parked tasks
    count as queued too, and again in ``parked``.
    """

    by_state: Mapping[TaskState, int]
    by_queue: Mapping[str, Mapping[TaskState, int]]
    waiting_by_priority: tuple[WaitingGroup, ...]
    oldest_waiting_seconds: float
    pools: tuple[PoolStats, ...]
    parked: int
    throughput_per_second: float
    total: int
    database_time: dt.datetime
    workers: tuple[WorkerInfo, ...] = ()  # live workers, each with its reservation if it holds one

    def to_dict(self) -> dict[str, Any]:
        """Plain data for JSON (``taskqueue stats --json``); times as ISO 8601."""
        data = dataclasses.asdict(self)
        data["database_time"] = self.database_time.isoformat()
        data["workers"] = [_iso(w) for w in data["workers"]]
        return data


def _iso(value: Any) -> Any:
    """Datetimes inside nested plain data as ISO 8601 strings."""
    if isinstance(value, dt.datetime):
        return value.isoformat()
    if isinstance(value, dict):
        return {k: _iso(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_iso(v) for v in value]
    return value
