"""The worker registry: live workers are listed, dead ones are ignored then deleted, reservations die with them."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from taskqueue import TaskQueue, ValidationError, Worker
from taskqueue.registry import Registry, delete_dead_workers
from tests.support.polling import sql, wait_for
from tests.test_worker import new_worker, running


def registry(tq: TaskQueue, name: str, *, capacity: int | None = 8, ttl: float = 30.0) -> Registry:
    return Registry(tq, name=name, queues=["q"], capacity=capacity, policy="backfill", ttl=ttl)


def test_running_worker_is_listed_and_leaves_on_stop(tq: TaskQueue) -> None:
    worker = new_worker(queues=["q"], capacity=12, name="w-listed", policy="strict")
    worker.handler("q", lambda task: None)
    with running(worker, tq):
        [info] = tq.workers()
        assert (info.name, info.queues, info.capacity, info.policy, info.alive) == (
            "w-listed", ("q",), 12, "strict", True,
        )
        assert info.expires_at > info.last_seen_at >= info.started_at
        assert info.reservation is None
    assert tq.workers() == []
    assert tq.workers(include_dead=True) == []


def test_expired_row_is_ignored_then_deleted_with_its_reservation(tq: TaskQueue, dsn: str) -> None:
    live, dead = registry(tq, "live"), registry(tq, "dead")
    live.beat(in_use=3, running=1)
    dead.beat(in_use=0, running=0)
    assert dead.reserve(task_id=42, required=8, queue="q", start_in=1.5)
    assert [r.task_id for r in live.reservations()] == [42]
    sql(dsn, "UPDATE taskqueue.workers SET expires_at = now() - interval '2 hours' WHERE name = 'dead'")

    assert [w.name for w in tq.workers()] == ["live"]
    assert tq.workers()[0].in_use == 3
    listed = {w.name: w for w in tq.workers(include_dead=True)}
    assert listed["dead"].alive is False and listed["dead"].reservation is not None
    assert live.reservations() == []  # a dead worker's reservation counts for nothing at once
    assert not dead.reserve(task_id=43, required=8, queue="q", start_in=0.0)  # nor can it reserve again

    assert delete_dead_workers(tq, keep=3600.0) == ["dead"]
    assert sql(dsn, "SELECT worker FROM taskqueue.reservations") == []
    assert [w.name for w in tq.workers(include_dead=True)] == ["live"]


def test_dead_row_kept_for_operators_until_keep_passes(tq: TaskQueue, dsn: str) -> None:
    registry(tq, "recent").beat(in_use=0, running=0)
    sql(dsn, "UPDATE taskqueue.workers SET expires_at = now() - interval '1 minute'")
    assert delete_dead_workers(tq, keep=3600.0) == []
    assert [w.alive for w in tq.workers(include_dead=True)] == [False]


def test_reservation_keeps_since_for_the_same_task(tq: TaskQueue, dsn: str) -> None:
    reg = registry(tq, "holder")
    reg.beat(in_use=0, running=0)
    assert reg.reserve(task_id=7, required=5, queue="q", start_in=2.0)
    sql(dsn, "UPDATE taskqueue.reservations SET since = since - interval '1 minute'")
    assert reg.reserve(task_id=7, required=5, queue="q", start_in=1.0)
    [first] = reg.reservations()
    assert reg.reserve(task_id=8, required=3, queue="q", start_in=0.0)
    [second] = reg.reservations()
    assert second.task_id == 8 and second.since > first.since
    reg.clear()
    assert reg.reservations() == []


def test_killed_worker_process_drops_out_after_its_lease(tq: TaskQueue, dsn: str) -> None:
    reg = registry(tq, "short", ttl=0.2)
    reg.beat(in_use=0, running=0)
    assert reg.reserve(task_id=1, required=1, queue="q", start_in=0.0)
    # No more beats, as if the process were killed: the row expires on its own.
    assert wait_for(lambda: tq.workers() == [])
    assert reg.reservations() == []


def test_bad_policy_and_include_dead_are_refused(tq: TaskQueue) -> None:
    with pytest.raises(ValidationError):
        Worker(policy="fifo")
    with pytest.raises(ValidationError):
        tq.workers(include_dead="yes")  # type: ignore[arg-type]


def test_stats_show_live_workers_and_reservations(tq: TaskQueue, dsn: str) -> None:
    holder = registry(tq, "holder")
    holder.beat(in_use=2, running=1)
    assert holder.reserve(task_id=5, required=8, queue="q", start_in=3.0)
    registry(tq, "gone").beat(in_use=0, running=0)
    sql(dsn, "UPDATE taskqueue.workers SET expires_at = now() - interval '1 second' WHERE name = 'gone'")
    stats = tq.stats()
    assert [(w.name, w.in_use, w.reservation.task_id if w.reservation else None) for w in stats.workers] == [
        ("holder", 2, 5)
    ]
    env = {**os.environ, "TASKQUEUE_DSN": dsn}
    shown = subprocess.run([sys.executable, "-m", "taskqueue", "stats", "--json"], env=env, capture_output=True,
                           text=True, timeout=60)
    assert shown.returncode == 0, shown.stderr
    doc = json.loads(shown.stdout)
    assert [(w["name"], w["reservation"]["task_id"]) for w in doc["workers"]] == [("holder", 5)]
    table = subprocess.run([sys.executable, "-m", "taskqueue", "stats"], env=env, capture_output=True, text=True,
                           timeout=60)
    assert table.returncode == 0 and "holder" in table.stdout and "gone" not in table.stdout
