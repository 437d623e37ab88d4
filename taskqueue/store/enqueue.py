"""Putting tasks in: one task in one statement, batches by COPY or by one INSERT.

Statements: ``tasks.sql`` (enqueue_task, reserve_task_ids, copy_tasks[_now],
insert_tasks, find_active_dedupe[s], notify_wakeup) and ``pools.sql``
(ensure_pools).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence

from ..errors import TaskQueueError
from ..spec import TaskBatch, TaskSpec
from .requests import Copy, Op, execute, first, rows, scalar

#: A dedupe race (the holder finishes between insert and look-up) settles in
#: one more try; this bounds a pathological loop.
DEDUPE_TRIES = 100


def notify(channel: str) -> Op[None]:
    """Wake the listening workers at commit (one signal per transaction, no data)."""
    yield from execute("notify_wakeup", channel=channel)


def ensure_pools(names: Sequence[str]) -> Op[None]:
    if names:
        yield from execute("ensure_pools", names=sorted(set(names)))


def enqueue_task(spec: TaskSpec, channel: str) -> Op[tuple[int, bool]]:
    """Insert one task with its pool row and wake-up signal; return (id, inserted).

    A live dedupe key returns the holder's id. One statement, so on an
    autocommit connection the whole enqueue is one round trip.
    """
    params = {
        "queue": spec.queue,
        "payload": spec.payload_json,
        "priority": spec.priority,
        "required": spec.required,
        "pool": spec.pool,
        "max_attempts": spec.max_attempts,
        "run_at": spec.run_at,
        "delay": spec.delay,
        "dedupe_key": spec.dedupe_key,
        "estimate": spec.estimate,
        "channel": channel,
    }
    for _ in range(DEDUPE_TRIES):
        task_id = yield from scalar("enqueue_task", **params)
        if task_id is not None:
            return task_id, True
        existing = yield from scalar("find_active_dedupe", queue=spec.queue, dedupe_key=spec.dedupe_key)
        if existing is not None:
            return existing, False
        # The holder finished between the two statements: the key is free again.
    raise TaskQueueError(f"dedupe key {spec.dedupe_key!r}: the insert did not settle after {DEDUPE_TRIES} tries")


def insert_batch(batch: TaskBatch, channel: str) -> Op[list[int]]:
    """Insert a validated batch with its pool rows and one wake-up; ids in input order.

    COPY unless dedupe keys need ON CONFLICT.
    """
    yield from ensure_pools([pool for pool in set(batch.pools) if pool is not None])
    if batch.has_dedupe_keys:
        ids = yield from insert_tasks(batch.specs())
    else:
        ids = yield from copy_tasks(batch)
    yield from notify(channel)
    return ids


def copy_tasks(batch: TaskBatch) -> Op[list[int]]:
    """COPY a batch without dedupe keys, with ids reserved first so they can be returned."""
    row = yield from first("reserve_task_ids", n=len(batch))
    assert row is not None
    now: dt.datetime = row["now"]
    ids: list[int] = row["ids"]
    columns = (ids, batch.queues, batch.payloads, batch.priorities, batch.requireds, batch.pools)
    if batch.has_times or batch.has_estimates:
        ats = [
            at if at is not None else now if delay is None else now + dt.timedelta(seconds=delay)
            for at, delay in zip(batch.run_ats, batch.delays, strict=True)
        ]
        states = ["scheduled" if at > now else "queued" for at in ats]
        yield Copy("copy_tasks", zip(*columns, states, batch.max_attempts, ats, batch.estimates, strict=True))
    else:
        states = ["queued"] * len(batch)
        yield Copy("copy_tasks_now", zip(*columns, states, batch.max_attempts, strict=True))
    return ids


def _aliases(specs: Sequence[TaskSpec]) -> tuple[list[int], dict[int, int]]:
    """Within a batch, the first spec with a (queue, dedupe key) stands for the others."""
    first_of: dict[tuple[str, str], int] = {}
    alias: dict[int, int] = {}
    unique: list[int] = []
    for i, spec in enumerate(specs):
        if spec.dedupe_key is not None:
            key = (spec.queue, spec.dedupe_key)
            if key in first_of:
                alias[i] = first_of[key]
                continue
            first_of[key] = i
        unique.append(i)
    return unique, alias


def insert_tasks(specs: Sequence[TaskSpec]) -> Op[list[int]]:
    """Insert a batch in one statement; duplicates of an active dedupe key get the holder's id."""
    pending, alias = _aliases(specs)
    ids: dict[int, int] = {}
    for _ in range(DEDUPE_TRIES):
        batch = [specs[i] for i in pending]
        inserted = yield from rows(
            "insert_tasks",
            queues=[s.queue for s in batch],
            payloads=[s.payload_json for s in batch],
            priorities=[s.priority for s in batch],
            requireds=[s.required for s in batch],
            pools=[s.pool for s in batch],
            max_attempts=[s.max_attempts for s in batch],
            run_ats=[s.run_at for s in batch],
            delays=[s.delay for s in batch],
            dedupe_keys=[s.dedupe_key for s in batch],
            estimates=[s.estimate for s in batch],
        )
        inserted_keys = {(r["queue"], r["dedupe_key"]) for r in inserted if r["dedupe_key"] is not None}
        new_ids = iter(sorted(r["id"] for r in inserted))
        skipped: list[int] = []
        for i in pending:
            spec = specs[i]
            if spec.dedupe_key is None or (spec.queue, spec.dedupe_key) in inserted_keys:
                ids[i] = next(new_ids)
            else:
                skipped.append(i)
        if not skipped:
            break
        found = yield from rows(
            "find_active_dedupes",
            queues=[specs[i].queue for i in skipped],
            dedupe_keys=[specs[i].dedupe_key for i in skipped],
        )
        holder = {(r["queue"], r["dedupe_key"]): r["id"] for r in found}
        pending = []
        for i in skipped:
            key = (specs[i].queue, specs[i].dedupe_key)
            if key in holder:
                ids[i] = holder[key]
            else:
                pending.append(i)  # finished meanwhile: insert it after all
        if not pending:
            break
    for i, j in alias.items():
        ids[i] = ids[j]
    return [ids[i] for i in range(len(specs))]
