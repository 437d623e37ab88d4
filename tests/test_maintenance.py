"""Self-maintenance: one leader per queue (advisory lock), rescue of expired leases, pruning."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from taskqueue import Task, TaskQueue, Worker
from taskqueue.maintenance import Leader, Maintainer, Pruner, Rescuer, leader_key
from tests.support.polling import sql, wait_for
from tests.support.worker_app import build_worker, read_log

ROOT = Path(__file__).resolve().parents[1]
WAIT = 10.0


def start(worker: Worker, tq: TaskQueue) -> threading.Thread:
    thread = threading.Thread(target=worker.run, args=(tq,), daemon=True)
    thread.start()
    assert worker.ready.wait(WAIT)
    return thread


def finish(worker: Worker, thread: threading.Thread) -> None:
    worker.stop(now=True)
    thread.join(WAIT)
    assert not thread.is_alive()


# -- leader election ----------------------------------------------------------
def test_leader_key_is_stable_and_per_schema() -> None:
    assert leader_key("taskqueue") == leader_key("taskqueue")
    assert leader_key("taskqueue") != leader_key("other_queue")
    assert -(2**63) <= leader_key("taskqueue") < 2**63


def test_exactly_one_leader_and_handover_on_resign(tq: TaskQueue) -> None:
    a, b = Leader(tq, worker="a"), Leader(tq, worker="b")
    try:
        assert a.ensure() is True
        assert b.ensure() is False
        assert a.ensure() is True  # still held, checked on its own session
        assert (a.is_leader, b.is_leader) == (True, False)
        a.resign()
        assert b.ensure() is True
        assert a.ensure() is False
    finally:
        a.resign()
        b.resign()


def test_leadership_dies_with_its_session(tq: TaskQueue, dsn: str) -> None:
    a, b = Leader(tq, worker="a"), Leader(tq, worker="b")
    try:
        assert a.ensure()
        killed = sql(
            dsn,
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE application_name = 'taskqueue-leader' AND datname = current_database()",
        )
        assert killed == [(True,)]
        assert wait_for(lambda: b.ensure())
        assert a.ensure() is False
        assert not a.is_leader
    finally:
        a.resign()
        b.resign()


def test_a_frozen_leader_loses_the_lock_after_its_idle_timeout(tq: TaskQueue) -> None:
    frozen = Leader(tq, worker="frozen", idle_timeout=0.5)
    other = Leader(tq, worker="other")
    try:
        assert frozen.ensure()
        # ``frozen`` now runs no round at all, as if SIGSTOPped: the server ends its idle session.
        assert wait_for(lambda: other.ensure(), timeout=5, interval=0.1)
        assert frozen.ensure() is False  # when it resumes, it finds out and steps down
        assert other.ensure() is True
    finally:
        frozen.resign()
        other.resign()


# -- the jobs -------------------------------------------------------------------
def test_rescuer_requeues_an_expired_lease_and_frees_its_pool_slot(tq: TaskQueue) -> None:
    tq.set_pool_limit("net", 1)
    task_id = tq.enqueue({}, queue="q", pool="net")
    claimed = tq.claim(queues=["q"], worker="dead", lease=0.2)
    assert claimed is not None and tq.pool("net").running == 1
    rescuer = Rescuer(tq, worker="test")
    assert wait_for(lambda: rescuer.run_once() == 1, timeout=5)
    task = tq.get(task_id)
    assert (task.state, task.attempts) == ("queued", 1)
    assert tq.pool("net").running == 0
    assert rescuer.run_once() == 0


def test_pruner_deletes_only_finished_tasks_older_than_the_retention(tq: TaskQueue) -> None:
    done_ids = [tq.enqueue({"n": i}, queue="p") for i in range(3)]
    waiting = tq.enqueue({}, queue="other")
    for _ in done_ids:
        task = tq.claim(queues=["p"], worker="w")
        assert task is not None
        tq.complete(task)
    assert Pruner(tq, retention=3600.0, worker="test").run_once() == 0
    assert wait_for(lambda: Pruner(tq, retention=0.0, worker="test").run_once() == 3, timeout=5)
    assert all(tq.get(i) is None for i in done_ids)
    assert tq.get(waiting).state == "queued"


def test_a_maintainer_that_is_not_the_leader_does_nothing(tq: TaskQueue) -> None:
    first = Maintainer(tq, worker="a", retention=0.0)
    second = Maintainer(tq, worker="b", retention=0.0)
    try:
        assert first.round() is True
        assert second.round() is False
        assert (first.rounds, second.rounds) == (1, 0)
    finally:
        first.leader.resign()
        second.leader.resign()


# -- inside workers ---------------------------------------------------------------
def _idle_worker(name: str) -> Worker:
    w = Worker(queues=["idle"], name=name, poll_interval=30.0, maintenance_interval=0.1)
    w.handler("idle")(lambda task: None)
    return w


def test_one_worker_at_a_time_does_maintenance_and_another_takes_over(tq: TaskQueue) -> None:
    a, b = _idle_worker("a"), _idle_worker("b")
    ta = start(a, tq)
    assert wait_for(lambda: a.maintainer is not None and a.maintainer.rounds > 0)
    tb = start(b, tq)
    try:
        rounds_a = a.maintainer.rounds
        assert wait_for(lambda: a.maintainer.rounds >= rounds_a + 5)  # b has had rounds of its own meanwhile
        assert b.maintainer is not None and b.maintainer.rounds == 0
        finish(a, ta)
        assert wait_for(lambda: b.maintainer.rounds > 0)
    finally:
        for worker, thread in ((a, ta), (b, tb)):
            if thread.is_alive():
                finish(worker, thread)


def test_an_abandoned_task_is_run_again_within_lease_plus_a_few_seconds(tq: TaskQueue) -> None:
    task_id = tq.enqueue({"n": 1}, queue="work", max_attempts=3)
    abandoned = tq.claim(queues=["work"], worker="crashed", lease=1.0)
    assert abandoned is not None
    t0 = time.monotonic()
    started: list[float] = []
    ran = threading.Event()
    w = Worker(queues=["work"], poll_interval=30.0)  # default maintenance settings

    @w.handler("work")
    def work(task: Task) -> str:
        started.append(time.monotonic())
        ran.set()
        return "rescued"

    thread = start(w, tq)
    try:
        assert ran.wait(WAIT)
    finally:
        finish(w, thread)
    assert started[0] - t0 < 1.0 + 3.0
    task = tq.get(task_id)
    assert (task.state, task.attempts, task.result) == ("done", 2, "rescued")


@pytest.mark.slow
def test_kill_9_of_a_worker_process_and_its_task_is_rescued_by_another(
    tq: TaskQueue, dsn: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log_path = tmp_path / "handlers.jsonl"
    monkeypatch.setenv("TASKQUEUE_TEST_LOG", str(log_path))  # the survivor runs in this process
    env = {**os.environ, "TASKQUEUE_TEST_LOG": str(log_path), "PYTHONPATH": str(ROOT)}
    task_id = tq.enqueue({"seconds": 30}, queue="sleep", max_attempts=3)
    with open(tmp_path / "stderr.txt", "wb") as err:
        victim = subprocess.Popen(
            [sys.executable, "-m", "tests.support.worker_app", dsn, "--lease", "1", "--queues", "sleep"],
            cwd=ROOT,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=err,
        )
    try:
        assert wait_for(lambda: any(e["event"] == "start" for e in read_log(str(log_path))), timeout=30)
        # The victim leads maintenance (it started first): its death must hand that over too.
        survivor = build_worker(lease=1.0, poll_interval=30.0)
        thread = start(survivor, tq)
        try:
            victim.send_signal(signal.SIGKILL)
            victim.wait(WAIT)
            killed_at = time.monotonic()
            assert wait_for(
                lambda: any(e["event"] == "start" and e["pid"] == os.getpid() for e in read_log(str(log_path))),
                timeout=20,
            )
            rerun = next(e for e in read_log(str(log_path)) if e["event"] == "start" and e["pid"] == os.getpid())
            assert rerun["t"] - killed_at < 1.0 + 4.0
            assert rerun["task_id"] == task_id and rerun["attempt"] == 2
        finally:
            finish(survivor, thread)
    finally:
        if victim.poll() is None:
            victim.kill()
    first = read_log(str(log_path))[0]
    assert first["pid"] == victim.pid and first["attempt"] == 1
    assert tq.get(task_id).state == "queued"  # given back by the survivor's shutdown, attempt not used
    assert tq.get(task_id).attempts == 1


def test_the_leader_worker_prunes_finished_tasks_past_the_retention(tq: TaskQueue) -> None:
    old = tq.enqueue({}, queue="p")
    task = tq.claim(queues=["p"], worker="w")
    assert task is not None
    tq.complete(task)
    kept = tq.enqueue({}, queue="other")
    w = Worker(queues=["idle"], poll_interval=30.0, retention=0.0, maintenance_interval=0.1, prune_interval=0.1)
    w.handler("idle")(lambda t: None)
    thread = start(w, tq)
    try:
        assert wait_for(lambda: tq.get(old) is None)
    finally:
        finish(w, thread)
    assert tq.get(kept).state == "queued"
