"""The worker runtime, in process: outcomes, capacity, wake-ups, heartbeats, shutdown.

Each test runs a ``Worker`` on a thread against its own database. Handlers
signal with ``threading.Event``; the only timed assertions are the upper bounds
the worker promises (woken in under a second, a delayed task on time).
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import pytest

from taskqueue import (
    Permanent,
    Retry,
    Task,
    TaskQueue,
    TaskQueueError,
    ValidationError,
    Worker,
)
from taskqueue.task import FINISHED_STATES
from tests.support.polling import sql, wait_for
from tests.support.worker_app import read_log

ROOT = Path(__file__).resolve().parents[1]
WAIT = 10.0  # generous bound for "eventually" (never a speed claim)


@contextlib.contextmanager
def running(worker: Worker, tq: TaskQueue) -> Iterator[threading.Thread]:
    """Run ``worker`` on a thread until the block ends; fail if it does not stop."""
    errors: list[BaseException] = []

    def target() -> None:
        try:
            worker.run(tq)
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    worker.signals.init()
    thread = threading.Thread(target=target, name="test-worker", daemon=True)
    thread.start()
    assert worker.ready.wait(WAIT), "worker did not become ready"
    try:
        yield thread
    finally:
        worker.stop(now=True)
        thread.join(WAIT)
        assert not thread.is_alive(), "worker did not stop"
        assert not errors, errors


def new_worker(**settings: Any) -> Worker:
    return Worker(**{"lease": 5.0, "poll_interval": 30.0, "grace": 5.0, "maintenance": False, **settings})


def recorded(worker: Worker, ids: Iterable[int], states: Iterable[str] = FINISHED_STATES) -> dict[int, str | None]:
    """Wait on the completer's test signal until every id was recorded in one of ``states``."""
    left, wanted, seen = set(ids), set(states), {}
    while left:
        for task_id, state in worker.signals.recorded.wait(WAIT).items():
            seen[task_id] = state
            if state in wanted:
                left.discard(task_id)
    return seen


# -- configuration ----------------------------------------------------------
def test_settings_validate_and_configure_overrides_only_given_values() -> None:
    w = Worker(queues=["scan"], capacity=15)
    assert (w.queues, w.capacity, w.effective_concurrency, w.lease, w.grace) == (["scan"], 15, 15, 30.0, 30.0)
    w.configure(capacity=4, grace=1.5)
    assert (w.queues, w.capacity, w.effective_concurrency, w.grace) == (["scan"], 4, 4, 1.5)
    w.configure(queues=["a", "b"], concurrency=2, lease=3)
    assert (w.queues, w.capacity, w.concurrency, w.lease) == (["a", "b"], 4, 2, 3.0)
    assert Worker().effective_concurrency == 32
    for bad in ({"capacity": -1}, {"concurrency": 0}, {"lease": 0}, {"grace": -1}, {"queues": "scan"}):
        with pytest.raises(ValidationError):
            Worker(**bad)


def test_one_handler_per_queue() -> None:
    w = Worker()

    @w.handler("q")
    def first(task: Task) -> None:
        return None

    assert w.handlers == {"q": first}
    with pytest.raises(ValidationError):
        w.handler("q")(lambda task: None)


# -- outcomes -------------------------------------------------------------
def test_outcomes_of_handlers(tq: TaskQueue) -> None:
    w = new_worker(queues=["ok", "boom", "retry", "permanent", "notjson", "orphan"])
    retry_runs: list[float] = []

    @w.handler("ok")
    def ok(task: Task) -> Any:
        return {"echo": task.payload}

    @w.handler("boom")
    def boom(task: Task) -> Any:
        raise ValueError(f"broken input {task.payload['n']}")

    @w.handler("retry")
    def retry(task: Task) -> Any:
        retry_runs.append(time.monotonic())
        if len(retry_runs) == 1:
            raise Retry(in_=0.3)
        return "second time lucky"

    @w.handler("permanent")
    def permanent(task: Task) -> Any:
        raise Permanent("will never work")

    @w.handler("notjson")
    def notjson(task: Task) -> Any:
        return {"when": object()}

    ids = {
        "ok": tq.enqueue({"a": 1}, queue="ok"),
        "boom": tq.enqueue({"n": 7}, queue="boom", max_attempts=1),
        "retry": tq.enqueue({}, queue="retry", max_attempts=2),
        "permanent": tq.enqueue({}, queue="permanent", max_attempts=5),
        "notjson": tq.enqueue({}, queue="notjson", max_attempts=5),
        "orphan": tq.enqueue({}, queue="orphan", max_attempts=5),
    }
    with running(w, tq):
        recorded(w, ids.values())
        # The worker survived all of that and still works.
        again = tq.enqueue({"a": 2}, queue="ok")
        assert recorded(w, [again]) == {again: "done"}

    got = {k: tq.get(i) for k, i in ids.items()}
    assert got["ok"].state == "done" and got["ok"].result == {"echo": {"a": 1}}
    assert got["boom"].state == "failed" and got["boom"].error.splitlines()[0] == "ValueError: broken input 7"
    assert "Traceback (most recent call last)" in got["boom"].error and "in boom" in got["boom"].error
    assert got["retry"].state == "done" and got["retry"].attempts == 2 and got["retry"].result == "second time lucky"
    assert retry_runs[1] - retry_runs[0] >= 0.25
    assert got["permanent"].state == "failed" and got["permanent"].attempts == 1
    assert "will never work" in got["permanent"].error
    assert got["notjson"].state == "failed" and got["notjson"].attempts == 1
    assert "not JSON" in got["notjson"].error
    assert got["orphan"].state == "failed" and got["orphan"].attempts == 1
    assert "no handler for queue 'orphan'" in got["orphan"].error


def test_a_raising_handler_is_retried_with_backoff_then_failed(tq: TaskQueue) -> None:
    w = new_worker(queues=["boom", "ok"])
    runs: list[int] = []

    @w.handler("boom")
    def boom(task: Task) -> Any:
        runs.append(task.attempts)
        raise RuntimeError("still broken")

    @w.handler("ok")
    def ok(task: Task) -> Any:
        return "fine"

    task_id = tq.enqueue({}, queue="boom", max_attempts=2)
    with running(w, tq):
        assert recorded(w, [task_id])[task_id] == "failed"
        after = tq.enqueue({}, queue="ok")
        assert recorded(w, [after]) == {after: "done"}
    assert runs == [1, 2]
    assert tq.get(task_id).error.splitlines()[0] == "RuntimeError: still broken"


# -- capacity ---------------------------------------------------------------
def test_running_tasks_fit_capacity_and_claims_fill_what_is_free(tq: TaskQueue) -> None:
    w = new_worker(queues=["fit"], capacity=5)
    started: dict[int, threading.Event] = {}
    release: dict[int, threading.Event] = {}
    lock = threading.Lock()
    in_use = [0]
    peak = [0]

    @w.handler("fit")
    def fit(task: Task) -> Any:
        with lock:
            in_use[0] += task.required
            peak[0] = max(peak[0], in_use[0])
        started[task.id].set()
        release[task.id].wait(WAIT)
        with lock:
            in_use[0] -= task.required
        return task.required

    ids = [tq.enqueue({}, queue="fit", required=r) for r in (3, 2, 3, 2)]
    for i in ids:
        started[i], release[i] = threading.Event(), threading.Event()
    try:
        with running(w, tq):
            assert started[ids[0]].wait(WAIT) and started[ids[1]].wait(WAIT)
            assert w.capacity_state is not None and w.capacity_state.in_use == 5
            assert [tq.get(i).state for i in ids[2:]] == ["queued", "queued"]
            release[ids[0]].set()  # frees 3: the next 3 fits, the 2 after it does not
            assert started[ids[2]].wait(WAIT)
            assert tq.get(ids[3]).state == "queued"
            release[ids[1]].set()  # frees 2
            assert started[ids[3]].wait(WAIT)
            for e in release.values():
                e.set()
            assert set(recorded(w, ids).values()) == {"done"}
    finally:
        for e in release.values():
            e.set()
    assert peak[0] == 5


def test_concurrency_caps_threads_when_capacity_is_none(tq: TaskQueue) -> None:
    w = new_worker(queues=["c"], capacity=None, concurrency=2)
    gate = threading.Event()
    lock = threading.Lock()
    now_running = [0]
    peak = [0]
    two = threading.Event()

    @w.handler("c")
    def c(task: Task) -> Any:
        with lock:
            now_running[0] += 1
            peak[0] = max(peak[0], now_running[0])
            if now_running[0] == 2:
                two.set()
        gate.wait(WAIT)
        with lock:
            now_running[0] -= 1

    ids = [tq.enqueue({}, queue="c", required=100) for _ in range(5)]
    try:
        with running(w, tq):
            assert two.wait(WAIT)
            assert sorted(tq.get(i).state for i in ids) == ["queued"] * 3 + ["running"] * 2
            gate.set()
            assert set(recorded(w, ids).values()) == {"done"}
    finally:
        gate.set()
    assert peak[0] == 2


# -- wake-ups ---------------------------------------------------------------
def test_an_idle_worker_is_woken_by_enqueue_in_under_a_second(tq: TaskQueue) -> None:
    w = new_worker(queues=["wake"], poll_interval=60.0)
    started = threading.Event()
    w.handler("wake")(lambda task: started.set())
    w.signals.init()
    with running(w, tq):
        assert w.signals.claimed.wait() == []  # an empty round: the claimer now sleeps until woken
        t0 = time.monotonic()
        tq.enqueue({}, queue="wake")
        assert started.wait(WAIT)
        assert time.monotonic() - t0 < 1.0


def test_a_delayed_task_starts_within_a_second_of_its_run_at(tq: TaskQueue) -> None:
    w = new_worker(queues=["later"], poll_interval=60.0)
    started_at: list[float] = []
    started = threading.Event()

    @w.handler("later")
    def later(task: Task) -> None:
        started_at.append(time.monotonic())
        started.set()

    with running(w, tq):
        t0 = time.monotonic()
        task_id = tq.enqueue({}, queue="later", delay=1.5)
        t1 = time.monotonic()
        assert started.wait(WAIT)
    task = tq.get(task_id)
    assert task.started_at is not None and task.started_at >= task.run_at
    assert started_at[0] >= t0 + 1.5 - 0.05
    assert started_at[0] <= t1 + 1.5 + 1.0


def test_a_freed_slot_of_a_full_pool_wakes_a_waiting_worker(tq: TaskQueue) -> None:
    tq.set_pool_limit("net", 1)
    first = tq.enqueue({}, queue="p", pool="net")
    second = tq.enqueue({}, queue="p", pool="net")
    holder = tq.claim(queues=["p"], worker="elsewhere")
    assert holder is not None and holder.id == first
    w = new_worker(queues=["p"], poll_interval=60.0)
    started = threading.Event()
    w.handler("p")(lambda task: started.set())
    with running(w, tq):
        assert tq.get(second).state == "queued"  # the pool is full
        t0 = time.monotonic()
        tq.complete(holder)
        assert started.wait(WAIT)
        assert time.monotonic() - t0 < 1.0
        assert recorded(w, [second]) == {second: "done"}


def test_the_worker_survives_losing_its_listen_connection(tq: TaskQueue, dsn: str) -> None:
    w = new_worker(queues=["l"], poll_interval=60.0)
    started = threading.Event()
    w.handler("l")(lambda task: started.set())
    w.signals.init()
    with running(w, tq):
        assert w.signals.listening.wait() == 1
        killed = sql(
            dsn,
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE application_name = 'taskqueue-listener' AND datname = current_database()",
        )
        assert killed == [(True,)]
        assert w.signals.listening.wait() == 2  # LISTEN again
        t0 = time.monotonic()
        tq.enqueue({}, queue="l")
        assert started.wait(WAIT)
        assert time.monotonic() - t0 < 1.0


# -- heartbeats and lost leases ---------------------------------------------
def test_heartbeats_keep_a_long_task_alive_past_its_lease(tq: TaskQueue) -> None:
    w = new_worker(queues=["long"], lease=0.6, maintenance=True, maintenance_interval=0.1)
    started, finish = threading.Event(), threading.Event()

    @w.handler("long")
    def long(task: Task) -> str:
        started.set()
        finish.wait(WAIT)
        return "made it"

    w.signals.init()
    task_id = tq.enqueue({}, queue="long")
    with running(w, tq):
        assert started.wait(WAIT)
        for _ in range(10):  # ten beats of a third of the lease: over three leases
            assert w.signals.beaten.wait() == 0  # nothing lost
        while not w.signals.maintained.wait():  # and the rescuer ran meanwhile, as the leader
            pass
        assert tq.get(task_id).state == "running"
        finish.set()
        assert w.signals.recorded.wait() == {task_id: "done"}
    task = tq.get(task_id)
    assert (task.state, task.attempts, task.result) == ("done", 1, "made it")


def test_a_lost_lease_frees_capacity_and_its_outcome_is_discarded(tq: TaskQueue, dsn: str) -> None:
    w = new_worker(queues=["lost"], capacity=1, concurrency=2, lease=0.9)
    first_started, second_started = threading.Event(), threading.Event()
    let_first_finish, first_returned = threading.Event(), threading.Event()

    @w.handler("lost")
    def lost(task: Task) -> Any:
        if task.attempts == 1:
            first_started.set()
            let_first_finish.wait(WAIT)
            first_returned.set()
            return "from the stale claim"
        second_started.set()
        return "from the current claim"

    task_id = tq.enqueue({}, queue="lost", required=1, max_attempts=3)
    try:
        with running(w, tq):
            assert first_started.wait(WAIT)
            sql(dsn, "UPDATE taskqueue.tasks SET lease_expires_at = now() - interval '1 second' WHERE id = %s",
                task_id)
            assert tq.rescue_expired() == 1
            # The heartbeat notices, stops counting the stale claim, and the worker
            # (capacity 1) claims the task again while the stale handler still runs.
            assert second_started.wait(WAIT)
            assert not first_returned.is_set()
            assert wait_for(lambda: tq.get(task_id).state == "done")
            let_first_finish.set()
            assert wait_for(lambda: w.capacity_state is not None and w.capacity_state.busy() == 0)
    finally:
        let_first_finish.set()
    task = tq.get(task_id)
    assert (task.state, task.attempts, task.result) == ("done", 2, "from the current claim")


# -- shutdown ---------------------------------------------------------------
def test_stop_lets_the_running_task_finish_and_claims_nothing_more(tq: TaskQueue) -> None:
    w = new_worker(queues=["s"], grace=WAIT)
    started, finish = threading.Event(), threading.Event()

    @w.handler("s")
    def s(task: Task) -> str:
        started.set()
        finish.wait(WAIT)
        return "finished"

    first = tq.enqueue({}, queue="s")
    thread = threading.Thread(target=w.run, args=(tq,), daemon=True)
    thread.start()
    try:
        assert started.wait(WAIT)
        w.stop()
        assert wait_for(lambda: not w.running)
        later = tq.enqueue({}, queue="s")
        assert thread.is_alive()  # waiting for the running task
        finish.set()
        thread.join(WAIT)
        assert not thread.is_alive()
    finally:
        finish.set()
        w.stop(now=True)
    assert tq.get(first).state == "done" and tq.get(first).result == "finished"
    assert tq.get(later).state == "queued"


def test_after_the_grace_period_running_tasks_go_back_to_the_queue(tq: TaskQueue) -> None:
    tq.set_pool_limit("g", 5)
    w = new_worker(queues=["g"], grace=0.3)
    started, finish = threading.Event(), threading.Event()

    @w.handler("g")
    def g(task: Task) -> str:
        started.set()
        finish.wait(WAIT)
        return "too late"

    task_id = tq.enqueue({}, queue="g", pool="g", max_attempts=1)
    thread = threading.Thread(target=w.run, args=(tq,), daemon=True)
    thread.start()
    try:
        assert started.wait(WAIT)
        assert tq.pool("g").running == 1
        w.stop()
        thread.join(WAIT)
        assert not thread.is_alive()
        task = tq.get(task_id)
        assert (task.state, task.attempts) == ("queued", 0)
        assert tq.pool("g").running == 0
        finish.set()  # the stale handler returns: its outcome must be discarded
        assert wait_for(lambda: w.capacity_state.busy() == 0)
        assert tq.get(task_id).state == "queued"
    finally:
        finish.set()


def _spawn_worker(dsn: str, log_path: Path, stderr_path: Path, *args: str) -> subprocess.Popen[bytes]:
    env = {**os.environ, "TASKQUEUE_TEST_LOG": str(log_path), "PYTHONPATH": str(ROOT)}
    with open(stderr_path, "wb") as stderr:
        return subprocess.Popen(
            [sys.executable, "-m", "tests.support.worker_app", dsn, *args],
            cwd=ROOT,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=stderr,
        )


@pytest.mark.slow
def test_sigterm_lets_the_running_task_finish_then_exits_0(tq: TaskQueue, dsn: str, tmp_path: Path) -> None:
    log_path = tmp_path / "handlers.jsonl"
    task_id = tq.enqueue({"seconds": 1.0}, queue="sleep")
    err = tmp_path / "stderr.txt"
    proc = _spawn_worker(dsn, log_path, err, "--grace", "20")
    try:
        assert wait_for(lambda: any(e["event"] == "start" for e in read_log(str(log_path))), timeout=30)
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err.read_text()
    assert [e["event"] for e in read_log(str(log_path))] == ["start", "end"]
    assert tq.get(task_id).state == "done"


@pytest.mark.slow
def test_a_second_signal_stops_at_once_and_gives_the_task_back(tq: TaskQueue, dsn: str, tmp_path: Path) -> None:
    log_path = tmp_path / "handlers.jsonl"
    task_id = tq.enqueue({"seconds": 60}, queue="sleep")
    err = tmp_path / "stderr.txt"
    proc = _spawn_worker(dsn, log_path, err, "--grace", "60")
    try:
        assert wait_for(lambda: any(e["event"] == "start" for e in read_log(str(log_path))), timeout=30)
        proc.send_signal(signal.SIGTERM)
        assert wait_for(lambda: "no new claims" in err.read_text(), timeout=30)
        proc.send_signal(signal.SIGINT)
        t0 = time.monotonic()
        proc.wait(timeout=30)
        elapsed = time.monotonic() - t0
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err.read_text()
    assert elapsed < 10  # not the 60 s grace, nor the 60 s handler
    task = tq.get(task_id)
    assert (task.state, task.attempts) == ("queued", 0)
    assert [e["event"] for e in read_log(str(log_path))] == ["start"]  # the handler never finished


# -- logging ----------------------------------------------------------------
def test_each_outcome_is_logged_with_task_id_queue_and_outcome(
    tq: TaskQueue, caplog: pytest.LogCaptureFixture
) -> None:
    w = new_worker(queues=["logged", "broken"])
    w.handler("logged")(lambda task: "ok")

    @w.handler("broken")
    def broken(task: Task) -> None:
        raise Permanent("no way")

    ok_id = tq.enqueue({}, queue="logged")
    bad_id = tq.enqueue({}, queue="broken")
    with caplog.at_level(logging.DEBUG, logger="taskqueue.worker"):
        with running(w, tq):
            recorded(w, [ok_id, bad_id])
            assert wait_for(lambda: len([r for r in caplog.records if hasattr(r, "outcome")]) >= 2)
    outcomes = [r for r in caplog.records if hasattr(r, "task_id") and hasattr(r, "outcome")]
    levels = {(r.task_id, r.queue, r.outcome): r.levelno for r in outcomes}
    assert levels[(ok_id, "logged", "done")] == logging.DEBUG  # a success: one line at DEBUG ...
    assert levels[(bad_id, "broken", "failed")] == logging.WARNING
    summaries = [r for r in caplog.records if getattr(r, "done", None)]
    assert [(r.levelno, r.done) for r in summaries] == [(logging.INFO, {"logged": 1})]  # ... and summed at INFO
    assert all(r.name.startswith("taskqueue.worker") for r in caplog.records if hasattr(r, "outcome"))


def test_successes_are_summed_at_info_at_most_every_summary_seconds(
    tq: TaskQueue, caplog: pytest.LogCaptureFixture
) -> None:
    w = new_worker(queues=["a", "b"])
    w.handler("a")(lambda task: None)
    w.handler("b")(lambda task: None)
    w.on_services.append(lambda worker: setattr(worker.completer, "summary_seconds", 3600.0))
    ids = [tq.enqueue(n, queue="a" if n % 3 else "b") for n in range(30)]
    with caplog.at_level(logging.INFO, logger="taskqueue.worker"), running(w, tq):
        assert set(recorded(w, ids).values()) == {"done"}
        assert not [r for r in caplog.records if getattr(r, "done", None)]  # within the hour: not yet
    [summary] = [r for r in caplog.records if getattr(r, "done", None)]  # on stop: the rest, once
    assert summary.done == {"a": 20, "b": 10} and summary.getMessage().startswith("30 tasks done in the last")
    assert not [r for r in caplog.records if getattr(r, "task_id", None) in ids]  # no line per success at INFO


def test_log_level_is_configurable() -> None:
    logger = logging.getLogger("taskqueue.worker")
    before = logger.level
    try:
        Worker(log_level="WARNING")
        assert logger.level == logging.WARNING
        Worker(log_level=logging.DEBUG)
        assert logger.level == logging.DEBUG
    finally:
        logger.setLevel(before)


def test_a_worker_runs_once_at_a_time_and_honours_an_early_stop(tq: TaskQueue) -> None:
    w = new_worker(queues=["x"])
    w.handler("x")(lambda task: None)
    with running(w, tq):
        with pytest.raises(TaskQueueError):
            w.run(tq)
    task_id = tq.enqueue({}, queue="x")
    w.stop()  # before run(): run() returns without claiming
    w.run(tq)
    assert tq.get(task_id).state == "queued"
