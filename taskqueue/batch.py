"""An ``enqueue_many`` batch validated column by column, in input order.

At 10k tasks a batch spends more time building objects than PostgreSQL
spends storing the rows, so entries of exact, plain types are checked inline
into columns; anything else goes through :func:`taskqueue.spec.build_spec_from_mapping`,
and both ways accept and reject exactly the same input.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from .spec import (
    ENQUEUE_KEYS,
    INT32_MAX,
    INT32_MIN,
    MAX_PAYLOAD_BYTES,
    TaskSpec,
    build_spec_from_mapping,
    encode_json_fast,
    plain_name,
)


@dataclass(slots=True)
class TaskBatch:
    """A validated ``enqueue_many`` batch, column by column, in input order.

    Columns rather than one object per task: at 10k tasks a batch spends more
    time building objects than PostgreSQL spends storing the rows.
    """

    payloads: list[str] = field(default_factory=list)
    queues: list[str] = field(default_factory=list)
    priorities: list[int] = field(default_factory=list)
    requireds: list[int] = field(default_factory=list)
    pools: list[str | None] = field(default_factory=list)
    max_attempts: list[int] = field(default_factory=list)
    run_ats: list[dt.datetime | None] = field(default_factory=list)
    delays: list[float | None] = field(default_factory=list)
    dedupe_keys: list[str | None] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.payloads)

    def append(self, spec: TaskSpec) -> None:
        self.payloads.append(spec.payload_json)
        self.queues.append(spec.queue)
        self.priorities.append(spec.priority)
        self.requireds.append(spec.required)
        self.pools.append(spec.pool)
        self.max_attempts.append(spec.max_attempts)
        self.run_ats.append(spec.run_at)
        self.delays.append(spec.delay)
        self.dedupe_keys.append(spec.dedupe_key)

    def specs(self) -> list[TaskSpec]:
        return [
            TaskSpec(*row)
            for row in zip(
                self.payloads, self.queues, self.priorities, self.requireds, self.pools,
                self.run_ats, self.delays, self.max_attempts, self.dedupe_keys,
                strict=True,
            )
        ]

    @property
    def has_dedupe_keys(self) -> bool:
        return any(key is not None for key in self.dedupe_keys)

    @property
    def has_times(self) -> bool:
        """Whether any task gave run_at or delay (else every task runs from now())."""
        return any(at is not None for at in self.run_ats) or any(d is not None for d in self.delays)


def _name_ok(value: Any, seen: set[str]) -> bool:
    """``check_name`` as a predicate, remembering good names: a batch repeats a few names."""
    if type(value) is not str:
        return False
    if value in seen:
        return True
    if plain_name(value):
        seen.add(value)
        return True
    return False


def build_batch(items: Sequence[Any]) -> TaskBatch:
    """Validate every entry of ``enqueue_many``; the first bad one raises, naming its index.

    Entries of exact, plain types are checked inline; anything else (and every
    entry with run_at or delay) goes through ``build_spec_from_mapping``, so
    both ways accept and reject exactly the same input.
    """
    batch = TaskBatch()
    seen: set[str] = set()
    allowed = ENQUEUE_KEYS.issuperset
    for index, spec in enumerate(items):
        if type(spec) is dict and "payload" in spec and allowed(spec):
            get = spec.get
            payload = encode_json_fast(spec["payload"], MAX_PAYLOAD_BYTES)
            queue = get("queue", "default")
            priority = get("priority", 0)
            required = get("required", 0)
            pool = get("pool")
            max_attempts = get("max_attempts", 3)
            dedupe_key = get("dedupe_key")
            if (
                payload is not None
                and _name_ok(queue, seen)
                and type(priority) is int and INT32_MIN <= priority <= INT32_MAX
                and type(required) is int and 0 <= required <= INT32_MAX
                and (pool is None or _name_ok(pool, seen))
                and type(max_attempts) is int and 1 <= max_attempts <= 1000
                and (dedupe_key is None or _name_ok(dedupe_key, seen))
                and get("run_at") is None
                and get("delay") is None
            ):
                batch.payloads.append(payload)
                batch.queues.append(queue)
                batch.priorities.append(priority)
                batch.requireds.append(required)
                batch.pools.append(pool)
                batch.max_attempts.append(max_attempts)
                batch.run_ats.append(None)
                batch.delays.append(None)
                batch.dedupe_keys.append(dedupe_key)
                continue
        batch.append(build_spec_from_mapping(spec, index))
    return batch
