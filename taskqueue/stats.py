"""What ``TaskQueue.stats()`` returns: frozen, typed counts an editor can complete."""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .task import TaskState


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

    def to_dict(self) -> dict[str, Any]:
        """Plain data for JSON (``taskqueue stats --json``); times as ISO 8601."""
        data = dataclasses.asdict(self)
        data["database_time"] = self.database_time.isoformat()
        return data
