"""Acceptance: the real CLI and real worker processes (``python -m taskqueue worker ...``).

Workers run ``tests.support.worker_app``, whose handlers append start/end
lines (with ``time.monotonic()``, one clock for every process) to the file in
``$TASKQUEUE_TEST_LOG``; the tests rebuild from that log who ran what and how
much ran at once. Waits poll the database with deadlines, never fixed sleeps.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from taskqueue import TaskQueue
from tests.support.worker_app import read_log

REPO = Path(__file__).resolve().parent.parent
APP = "tests.support.worker_app"

pytestmark = pytest.mark.slow


def cli_env(dsn: str, log: Path | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("TASKQUEUE_DSN", "TASKQUEUE_SCHEMA")}
    env["TASKQUEUE_DSN"] = dsn
    env["PYTHONUNBUFFERED"] = "1"
    if log is not None:
        env["TASKQUEUE_TEST_LOG"] = str(log)
    return env


def run_cli(dsn: str, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "taskqueue", *args],
        cwd=REPO, env=cli_env(dsn), capture_output=True, text=True, timeout=timeout,
    )


class Workers:
    """Worker processes started with the CLI; all are killed at teardown."""

    def __init__(self, dsn: str, log: Path, tmp: Path) -> None:
        self.dsn, self.log, self.tmp = dsn, log, tmp
        self.procs: list[subprocess.Popen[bytes]] = []

    def start(self, attr: str = "worker", *flags: str) -> subprocess.Popen[bytes]:
        n = len(self.procs)
        stderr = open(self.tmp / f"worker{n}.err", "wb")  # noqa: SIM115 - closed with the process
        proc = subprocess.Popen(
            [sys.executable, "-m", "taskqueue", "worker", f"{APP}:{attr}", "--no-migrate", *flags],
            cwd=REPO, env=cli_env(self.dsn, self.log), stdout=subprocess.DEVNULL, stderr=stderr,
        )
        stderr.close()
        self.procs.append(proc)
        return proc

    def stderr(self, proc: subprocess.Popen[bytes]) -> str:
        return (self.tmp / f"worker{self.procs.index(proc)}.err").read_text(errors="replace")

    def close(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.kill()
            proc.wait(timeout=30)


@pytest.fixture
def log(tmp_path: Path) -> Path:
    return tmp_path / "handlers.jsonl"


@pytest.fixture
def workers(dsn: str, log: Path, tmp_path: Path) -> Iterator[Workers]:
    group = Workers(dsn, log, tmp_path)
    try:
        yield group
    finally:
        group.close()


def wait_for(predicate: Callable[[], Any], timeout: float, what: str, interval: float = 0.05) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(interval)


def events(log: Path, event: str, task_id: int | None = None) -> list[dict[str, Any]]:
    return [e for e in read_log(str(log)) if e["event"] == event and (task_id is None or e["task_id"] == task_id)]


def listening_sessions(tq: TaskQueue) -> int:
    """Sessions whose last statement was LISTEN: idle workers waiting for a NOTIFY."""
    import psycopg

    with psycopg.connect(tq.dsn, autocommit=True) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND query ILIKE 'LISTEN%'"
        ).fetchone()
    return int(row[0]) if row else 0


def start_ready(workers: Workers, tq: TaskQueue, log: Path, attr: str = "worker", *flags: str) -> subprocess.Popen[bytes]:
    """Start a worker and return once it has run a warm-up task and LISTENs."""
    before = listening_sessions(tq)
    proc = workers.start(attr, *flags)
    warm = tq.enqueue({"warm-up": True}, queue="work")
    wait_for(lambda: events(log, "end", warm) or proc.poll() is not None, 60, "the warm-up task")
    assert proc.poll() is None, workers.stderr(proc)
    wait_for(lambda: listening_sessions(tq) > before, 30, "the worker's LISTEN")
    return proc


def done(tq: TaskQueue, task_id: int) -> bool:
    task = tq.get(task_id)
    return task is not None and task.finished


# -- the big one ---------------------------------------------------------------


def peak_concurrency(runs: list[dict[str, Any]], key: Callable[[dict[str, Any]], Any], weight: Callable[[dict[str, Any]], int]) -> dict[Any, int]:
    """Peak sum of ``weight`` per ``key`` over the handlers' start/end log (ends first on ties)."""
    points = []
    for e in runs:
        sign = 1 if e["event"] == "start" else -1
        points.append((e["t"], 0 if sign < 0 else 1, key(e), sign * weight(e)))
    current: dict[Any, int] = defaultdict(int)
    peak: dict[Any, int] = defaultdict(int)
    for _t, _order, k, delta in sorted(points, key=lambda p: (p[0], p[1])):
        current[k] += delta
        peak[k] = max(peak[k], current[k])
    return dict(peak)


def test_two_workers_run_every_task_once_within_pools_and_capacity(
    dsn: str, tq: TaskQueue, workers: Workers, log: Path, tmp_path: Path
) -> None:
    limits = {"10.0.1.0/24": 1, "10.0.2.0/24": 2, "10.0.3.0/24": 3, "10.0.4.0/24": 2}
    for pool, limit in limits.items():
        assert run_cli(dsn, "pools", "set", pool, str(limit)).returncode == 0
    lines = []
    for i in range(240):
        pool = list(limits)[i % len(limits)]
        lines.append(json.dumps({
            "payload": {"sleep": 0.01 + (i % 4) * 0.01},
            "queue": "work",
            "priority": i % 3,
            "required": 1 + i % 3,
            "pool": pool,
        }))
    path = tmp_path / "load.jsonl"
    path.write_text("\n".join(lines) + "\n")
    loaded = run_cli(dsn, "enqueue", "--file", str(path))
    assert loaded.returncode == 0, loaded.stderr

    big = workers.start("worker", "--capacity", "4")  # overrides the Worker's own capacity of 10
    small = workers.start("small_worker")  # capacity 3
    wait_for(lambda: tq.stats().by_state["done"] == 240, 180, "all 240 tasks done", interval=0.2)

    for proc in (big, small):
        assert proc.poll() is None, workers.stderr(proc)
    runs = read_log(str(log))
    starts = Counter(e["task_id"] for e in runs if e["event"] == "start")
    ends = [e for e in runs if e["event"] == "end"]
    ids = {t.id for t in tq.tasks(queue="work", limit=1000)}
    assert len(ids) == 240
    assert set(starts) == ids and set(starts.values()) == {1}, "every task runs exactly once"
    assert len(ends) == 240 and {e["outcome"] for e in ends} == {"ok"}

    pool_peak = peak_concurrency(runs, key=lambda e: e["pool"], weight=lambda e: 1)
    for pool, limit in limits.items():
        assert 1 <= pool_peak[pool] <= limit, (pool, pool_peak[pool], limit)
    capacity = {big.pid: 4, small.pid: 3}
    worker_peak = peak_concurrency(runs, key=lambda e: e["pid"], weight=lambda e: e["required"])
    assert set(worker_peak) == set(capacity), "both workers took part"
    for pid, peak in worker_peak.items():
        assert peak <= capacity[pid], (pid, peak, capacity[pid])
    assert all(p.running == 0 for p in tq.pools())

    stats = json.loads(run_cli(dsn, "stats", "--json").stdout)
    assert stats["by_state"]["done"] == 240 and stats["by_state"]["running"] == 0


# -- wake-ups and timing -----------------------------------------------------------


def test_idle_worker_wakes_in_under_a_second(tq: TaskQueue, workers: Workers, log: Path) -> None:
    start_ready(workers, tq, log)  # poll interval is 5 s: a quick start can only come from NOTIFY
    for _ in range(3):
        sent = time.monotonic()
        task_id = tq.enqueue({"wake": True}, queue="work")
        started = wait_for(lambda: events(log, "start", task_id), 10, "the woken task")[0]
        assert started["t"] - sent < 1.0, f"woke after {started['t'] - sent:.3f} s"
        wait_for(lambda: done(tq, task_id), 10, "the task to finish")


def test_delayed_task_starts_on_time(dsn: str, tq: TaskQueue, workers: Workers, log: Path) -> None:
    start_ready(workers, tq, log)
    result = run_cli(dsn, "enqueue", '{"sleep": 0}', "--queue", "work", "--delay", "2")
    assert result.returncode == 0, result.stderr
    task_id = int(result.stdout.split()[-1])
    wait_for(lambda: done(tq, task_id), 20, "the delayed task")
    task = tq.get(task_id)
    assert task is not None and task.state == "done" and task.started_at is not None
    late = (task.started_at - task.run_at).total_seconds()
    assert 0 <= late < 1.0, f"started {late:.3f} s after run_at"


# -- shutdown and crashes ------------------------------------------------------------


def test_sigterm_lets_the_running_task_finish_then_exits_zero(tq: TaskQueue, workers: Workers, log: Path) -> None:
    proc = start_ready(workers, tq, log)
    task_id = tq.enqueue({"seconds": 1.5}, queue="sleep")
    wait_for(lambda: events(log, "start", task_id), 20, "the task to start")
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=30) == 0, workers.stderr(proc)
    [end] = events(log, "end", task_id)
    assert end["outcome"] == "ok"
    task = tq.get(task_id)
    assert task is not None and task.state == "done" and task.attempts == 1


def test_kill_9_task_is_rescued_and_run_by_another_worker(tq: TaskQueue, workers: Workers, log: Path) -> None:
    doomed = workers.start("worker", "--lease", "2")
    task_id = tq.enqueue({"seconds": 1.0}, queue="sleep")
    [first] = wait_for(lambda: events(log, "start", task_id), 60, "the first worker to start the task")
    assert first["pid"] == doomed.pid
    doomed.kill()  # SIGKILL: no release, no goodbye; only the lease can tell
    doomed.wait(timeout=10)
    survivor = workers.start("worker", "--lease", "2")
    ends = wait_for(lambda: events(log, "end", task_id), 60, "the rescued task to finish")
    assert [e["pid"] for e in ends] == [survivor.pid]
    wait_for(lambda: done(tq, task_id), 10, "the task to be recorded done")
    task = tq.get(task_id)
    assert task is not None and task.state == "done" and task.attempts == 2
    assert [p.running for p in tq.pools()] == [0] * len(tq.pools())
    assert survivor.poll() is None, workers.stderr(survivor)


def test_raising_handler_is_retried_then_failed_and_worker_survives(
    dsn: str, tq: TaskQueue, workers: Workers, log: Path
) -> None:
    proc = start_ready(workers, tq, log)
    result = run_cli(dsn, "enqueue", "{}", "--queue", "fail", "--max-attempts", "2")
    task_id = int(result.stdout.split()[-1])
    wait_for(lambda: done(tq, task_id), 30, "the failing task to run out of attempts", interval=0.1)
    task = tq.get(task_id)
    assert task is not None and task.state == "failed" and task.attempts == 2
    assert "always fails" in (task.error or "")
    assert [e["outcome"] for e in events(log, "end", task_id)] == ["RuntimeError", "RuntimeError"]

    after = tq.enqueue({"sleep": 0}, queue="work")
    wait_for(lambda: done(tq, after), 10, "a task after the failures")
    assert proc.poll() is None, workers.stderr(proc)
    shown = json.loads(run_cli(dsn, "tasks", "show", str(task_id), "--json").stdout)
    assert shown["state"] == "failed"


# -- the demo ------------------------------------------------------------------------


def test_demo_runs_and_proves_its_rules(dsn: str, tq: TaskQueue) -> None:
    result = run_cli(dsn, "demo", "--dsn", dsn, "--tasks", "160", "--work-scale", "0.3", "--seconds", "90")
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "all rules held" in result.stdout
    for heading in ("peak running vs limit", "peak in use vs capacity", "wait by priority"):
        assert heading in result.stdout
    assert tq.stats().total == 0, "the demo works in its own schema"
