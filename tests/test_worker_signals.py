"""Signals against a real ``taskqueue worker`` process: bursts must never hang it.

Two SIGINTs sent back to back used to deadlock the worker: the second
signal handler ran inside the first one's ``Event.set()`` and waited for the
lock its own thread held. The handler now only records the signal; these
tests send bursts with no gap, many times, and require a prompt exit.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from taskqueue import TaskQueue
from tests.support.polling import wait_for

ROOT = Path(__file__).resolve().parents[1]
ROUNDS = 6
AT_ONCE = 3
EXIT_BOUND = 20.0  # a hung worker never exits; a healthy idle one takes well under a second


def _start(dsn: str, stderr_path: Path, *args: str) -> subprocess.Popen[bytes]:
    env = {**os.environ, "TASKQUEUE_DSN": dsn, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    with open(stderr_path, "wb") as stderr:
        return subprocess.Popen(
            [sys.executable, "-m", "taskqueue", "worker", "tests.support.worker_app:worker", "--no-migrate", *args],
            cwd=ROOT,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=stderr,
        )


def _burst(pid: int, count: int, sig: int = signal.SIGINT) -> None:
    """``count`` signals with no pause between them (``os.kill`` back to back).

    The kernel merges a signal that arrives while the same one is still pending,
    so back-to-back kills alone mostly land as one; a few bursts spread over a
    few milliseconds make a signal land while the previous handler is running.
    """
    for i in range(count):
        os.kill(pid, sig)
        if i % 2:
            os.sched_yield()


def _run_rounds(dsn: str, tmp_path: Path, count: int, sig: int = signal.SIGINT, rounds: int = ROUNDS) -> None:
    for round_no in range(rounds):
        procs = []
        try:
            for i in range(AT_ONCE):
                err = tmp_path / f"stderr-{sig}-{count}-{round_no}-{i}.txt"
                procs.append((_start(dsn, err), err))
            for proc, err in procs:
                # The handlers are in place once the worker logs that it is starting.
                assert wait_for(lambda: " starting: " in err.read_text(), timeout=30), err.read_text()
            for proc, _ in procs:
                _burst(proc.pid, count, sig)
            for proc, err in procs:
                try:
                    proc.wait(timeout=EXIT_BOUND)
                except subprocess.TimeoutExpired:
                    pytest.fail(f"round {round_no}: the worker hung after {count} signals\n{err.read_text()}")
                text = err.read_text()
                assert proc.returncode in (0, 130), (proc.returncode, text)
                assert "Traceback" not in text, text
        finally:
            for proc, _ in procs:
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()


@pytest.mark.slow
def test_two_sigints_with_no_gap_never_hang_the_worker(tq: TaskQueue, dsn: str, tmp_path: Path) -> None:
    _run_rounds(dsn, tmp_path, 2)


@pytest.mark.slow
def test_a_burst_of_many_signals_never_hangs_the_worker(tq: TaskQueue, dsn: str, tmp_path: Path) -> None:
    _run_rounds(dsn, tmp_path, 200)
    _run_rounds(dsn, tmp_path, 5, signal.SIGTERM, rounds=2)
