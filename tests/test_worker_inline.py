"""The inline lane (``Worker(inline=True)``): sync handlers on the claim loop's own thread.

In process: claim order, one thread, outcomes in batches, a pooled outcome
written before the next handler, a stop that gives the claims not begun back
at once, and the settings it refuses. Through the CLI: two ``--inline``
processes share a queue and run every task exactly once.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from taskqueue import Permanent, Retry, Task, TaskQueue, ValidationError, Worker
from taskqueue.worker.capacity import Capacity
from taskqueue.worker.completer import Completer
from taskqueue.worker.executor import Outcomes
from taskqueue.worker.inline import InlineLane
from tests.support.polling import sql, wait_for
from tests.support.worker_app import read_log
from tests.test_worker import WAIT, new_worker, recorded, running

ROOT = Path(__file__).resolve().parents[1]


def _until_an_empty_round(worker: Worker) -> None:
    """Until the claimer has found nothing twice running: it sleeps now, and its next round is a whole batch.

    A NOTIFY that arrives during a round of many makes the round after it a
    short one, of 8; on a loaded machine the listener can deliver one late,
    during the first empty round, and the 20 tasks a test enqueued next were
    claimed 8 first. So one more round is asked for at once: it asks for at
    most 8 if the first was cut short, and the round after it is whole.
    """
    assert worker.claimer is not None
    while worker.signals.claimed.wait(WAIT):
        pass
    worker.claimer.interrupt()
    while worker.signals.claimed.wait(WAIT):
        pass


def start_warmed_up(worker: Worker, tq: TaskQueue) -> threading.Thread:
    """Start ``worker`` on a thread of its own, run one warm-up task, and wait for an empty claim round.

    The handler's time is then known, so the next claim is a whole batch. The caller stops the worker.
    """
    warm = tq.enqueue("warm-up")
    thread = threading.Thread(target=worker.run, args=(tq,), daemon=True)
    worker.signals.init()
    thread.start()
    assert worker.ready.wait(WAIT)
    recorded(worker, [warm])
    _until_an_empty_round(worker)
    return thread


def test_inline_runs_every_task_on_the_claimer_thread_in_claim_order(tq: TaskQueue) -> None:
    ran: list[tuple[int, int]] = []
    threads: set[str] = set()
    worker = new_worker(inline=True)

    @worker.handler("default")
    def handle(task: Task) -> Any:
        ran.append((task.priority, task.id))
        threads.add(threading.current_thread().name)
        if task.payload == "retry":
            raise Retry(in_=3600)
        if task.payload == "permanent":
            raise Permanent("never")
        return {"id": task.id}

    ids = tq.enqueue_many([{"payload": i, "priority": (i * 7) % 5} for i in range(240)])
    retry_id = tq.enqueue("retry", priority=2)
    permanent_id = tq.enqueue("permanent", priority=4)
    with running(worker, tq):
        seen = recorded(worker, [*ids, retry_id, permanent_id], states=("done", "scheduled", "failed"))
    assert ran == sorted(ran), "tasks ran out of claim order"
    assert len(ran) == len(set(ran)) == 242
    assert threads == {"taskqueue-claimer"}
    assert worker.executor is not None and worker.executor.alive_threads() == 0
    assert seen[retry_id] == "scheduled" and seen[permanent_id] == "failed"
    assert {seen[i] for i in ids} == {"done"}
    done = sql(tq.dsn, "SELECT result FROM taskqueue.tasks WHERE id = %s", ids[-1])
    assert done == [({"id": ids[-1]},)]
    # Outcomes are written a batch at a time: a claim of one, then claims of up to 100.
    assert worker.completer is not None and worker.completer.batches <= 12, worker.completer.batches


def test_inline_writes_a_pooled_outcome_before_the_next_handler_runs(tq: TaskQueue) -> None:
    worker = new_worker(inline=True)
    states: dict[int, str] = {}

    @worker.handler("default")
    def handle(task: Task) -> Any:
        if task.payload == "after":
            row = sql(tq.dsn, "SELECT state FROM taskqueue.tasks WHERE payload = '\"pooled\"'::jsonb")
            states[task.id] = row[0][0]
        return None

    warm = tq.enqueue("warm-up")  # so that the next claim is a batch, not one task
    with running(worker, tq):
        recorded(worker, [warm])
        _until_an_empty_round(worker)
        ids = tq.enqueue_many([
            {"payload": "pooled", "pool": "net-1", "priority": 0},
            {"payload": "after", "priority": 1},
        ])
        recorded(worker, ids)
    assert list(states.values()) == ["done"], "the pooled task's outcome waited for the end of the batch"
    pool = tq.pool("net-1")
    assert pool is not None and pool.running == 0


def test_inline_stop_finishes_the_task_in_hand_and_gives_the_rest_back_at_once(
    tq: TaskQueue, caplog: pytest.LogCaptureFixture
) -> None:
    worker = new_worker(inline=True, grace=30.0)
    started, release = threading.Event(), threading.Event()
    ran: list[int] = []

    @worker.handler("default")
    def handle(task: Task) -> Any:
        ran.append(task.id)
        if task.payload == "block":
            started.set()
            assert release.wait(WAIT)
        return None

    thread = start_warmed_up(worker, tq)
    try:
        ids = tq.enqueue_many([{"payload": "block", "priority": 0}] + [{"payload": i, "priority": 1} for i in range(9)])
        assert started.wait(WAIT), "the first task of the batch did not start"
        claimed = sql(tq.dsn, "SELECT count(*) FROM taskqueue.tasks WHERE state = 'running'")[0][0]
        assert claimed == 10, "the batch was not claimed at once"
        with caplog.at_level(logging.DEBUG, logger="taskqueue.worker"):
            worker.stop()  # graceful: the task in hand may finish
            release.set()
            thread.join(WAIT)
        assert not thread.is_alive(), "the worker did not stop"
    finally:
        release.set()
        worker.stop(now=True)
    assert ran[1:] == [ids[0]], "a claim not begun ran after the stop"  # ran[0]: the warm-up
    rows = dict(sql(tq.dsn, "SELECT id, state FROM taskqueue.tasks WHERE id = ANY(%s)", ids))
    assert rows[ids[0]] == "done"
    assert {rows[i] for i in ids[1:]} == {"queued"}
    attempts = {a for (a,) in sql(tq.dsn, "SELECT attempts FROM taskqueue.tasks WHERE id = ANY(%s)", ids[1:])}
    assert attempts == {0}, "a claim given back used up an attempt"
    given = [r for r in caplog.records if getattr(r, "outcome", None) == "released"]
    assert [r.levelno for r in given].count(logging.INFO) == 1, "one line says how many went back"
    assert "9 claims not begun" in next(r.getMessage() for r in given if r.levelno == logging.INFO)
    assert sorted(r.task_id for r in given if r.levelno == logging.DEBUG) == sorted(ids[1:])


def test_inline_refuses_handler_threads_and_leaves_the_worker_unchanged() -> None:
    with pytest.raises(ValidationError, match="concurrency"):
        Worker(inline=True, concurrency=4)
    worker = Worker(inline=True)
    with pytest.raises(ValidationError, match="concurrency"):
        worker.configure(concurrency=2, capacity=7)
    assert worker.concurrency is None and worker.capacity is None
    with pytest.raises(ValidationError, match="inline"):
        worker.configure(inline="yes")  # type: ignore[arg-type]
    assert worker.inline is True and worker.effective_concurrency == 1
    threaded = Worker(concurrency=4)
    with pytest.raises(ValidationError, match="concurrency"):
        threaded.configure(inline=True)
    assert threaded.inline is False
    assert Worker(inline=True, concurrency=1).configure(inline=False, concurrency=8).effective_concurrency == 8


def run_two_inline_processes(
    tq: TaskQueue, dsn: str, tmp_path: Path, queues: str, ids: list[int]
) -> tuple[list[dict[str, Any]], list[str], list[int | None]]:
    """Two ``taskqueue worker --inline`` processes on ``queues`` until ``ids`` are done.

    Their handlers' start lines (see tests/support/worker_app.py), their stderr and their exit codes.
    """
    log = tmp_path / "handlers.jsonl"
    env = {k: v for k, v in os.environ.items() if k not in ("TASKQUEUE_DSN", "TASKQUEUE_SCHEMA")}
    env.update(TASKQUEUE_DSN=dsn, TASKQUEUE_TEST_LOG=str(log), PYTHONUNBUFFERED="1")
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "taskqueue", "worker", "tests.support.worker_app:worker", "--no-migrate",
             "--inline", "--queues", queues],
            cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        )
        for _ in range(2)
    ]
    try:
        assert wait_for(lambda: tq.stats().by_state["done"] == len(ids), timeout=60), tq.stats().by_state
    finally:
        for proc in procs:
            proc.terminate()
        errors = [proc.communicate(timeout=30)[1].decode(errors="replace") for proc in procs]
    starts = [e for e in read_log(str(log)) if e["event"] == "start"]
    return starts, errors, [proc.returncode for proc in procs]


@pytest.mark.slow
def test_two_inline_processes_run_every_task_exactly_once(tq: TaskQueue, dsn: str, tmp_path: Path) -> None:
    ids = tq.enqueue_many([{"payload": {"sleep": 0.001}, "queue": "work"} for _ in range(400)])
    starts, errors, codes = run_two_inline_processes(tq, dsn, tmp_path, "work", ids)
    count = Counter(e["task_id"] for e in starts)
    assert set(count) == set(ids)
    assert max(count.values()) == 1, "a task ran twice"
    assert len({e["pid"] for e in starts}) == 2, f"one process ran everything: {errors}"
    assert all(" inline" in err for err in errors), "a worker did not say it runs inline"
    assert codes == [0, 0], errors


def test_a_claim_lost_before_its_handler_begins_is_not_run(tq: TaskQueue, dsn: str) -> None:
    """Its lease went while it waited in the batch: running it could run it twice (threads alike: Outcomes.run)."""
    ran: list[int] = []
    tq.enqueue_many([{"payload": i} for i in range(3)])
    tasks = tq.claim_many(limit=3, worker="inline-test")
    capacity = Capacity(None, 1, on_free=lambda: None, inline=True)
    capacity.add_all(tasks, time.monotonic())
    completer = Completer(tq, capacity, worker="inline-test")
    outcomes = Outcomes(capacity, completer, {"default": lambda task: ran.append(task.id)}, worker="inline-test")
    lane = InlineLane(tq, outcomes, completer, capacity, worker="inline-test", lease=30.0)
    for task in tasks:
        lane.submit(task)
    assert capacity.lose(tasks[1])  # as the heartbeat does when the lease is gone
    lane.run_batch(lambda: False)
    assert ran == [tasks[0].id, tasks[2].id]
    assert capacity.busy() == 0 and capacity.threads_busy() == 0  # its thread and its entry are free again
    states = dict(sql(dsn, "SELECT id, state FROM taskqueue.tasks WHERE id = ANY(%s)", [t.id for t in tasks]))
    assert (states[tasks[0].id], states[tasks[1].id], states[tasks[2].id]) == ("done", "running", "done")


def test_a_notify_during_a_batch_gets_an_urgent_task_run_next(tq: TaskQueue) -> None:
    """Without the look between handlers, the urgent task would wait for the whole batch."""
    worker = new_worker(inline=True)
    ran: list[int] = []
    enqueued = threading.Event()

    @worker.handler("default")
    def handle(task: Task) -> Any:
        ran.append(task.id)
        if task.payload == "first":
            assert enqueued.wait(WAIT)
            assert wait_for(worker.claimer.notified.is_set if worker.claimer else lambda: False, timeout=WAIT)
        return None

    warm = tq.enqueue("warm-up")
    with running(worker, tq):
        recorded(worker, [warm])
        _until_an_empty_round(worker)
        rest = [{"payload": i, "priority": 5} for i in range(9)]
        batch = tq.enqueue_many([{"payload": "first", "priority": 5}, *rest])
        assert wait_for(lambda: len(ran) >= 2), "the batch did not start"
        urgent = tq.enqueue("urgent", priority=0)
        enqueued.set()
        recorded(worker, [*batch, urgent])
    assert ran[1:3] == [batch[0], urgent], ran
    assert ran[3:] == batch[1:]
