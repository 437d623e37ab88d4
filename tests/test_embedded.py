"""The embedded PostgreSQL: any interruption of any client leaves it able to start.

Clients are killed (SIGKILL) or interrupted (SIGINT, alone or in a burst with
no gap) at random moments, during a first ``initdb``, while a server starts,
and while commands and workers use it; then the next command must succeed.
Each test owns its data directory (``$TASKQUEUE_HOME``) and stops its server.

A SIGINT in the first few dozen milliseconds lands in Python's own start-up,
before any line of taskqueue runs, and Python prints a traceback there that no
program can prevent; the random moments therefore start after the measured
start-up time of ``import taskqueue.cli``.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from taskqueue.embedded import EmbeddedServer

ROOT = Path(__file__).resolve().parents[1]
BOUND = 60.0  # a command that never returns fails the test instead of hanging it
SEED = int(os.environ.get("TASKQUEUE_TEST_SEED", "0")) or random.randrange(1, 10**6)

CLIENTS = (
    ["stats", "--watch", "--json", "--interval", "0.1"],
    ["stats"],
    ["migrate"],
    ["tasks", "-n", "5"],
    ["enqueue", '{"n": 1}', "--queue", "work"],
    ["worker", "tests.support.worker_app:worker"],
    ["embedded", "start"],
    ["embedded", "stop"],
)


def _env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("TASKQUEUE_DSN", "TASKQUEUE_SCHEMA")}
    env["TASKQUEUE_HOME"] = str(home)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)
    return env


def _spawn(home: Path, args: list[str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "taskqueue", *args],
        cwd=ROOT,
        env=_env(home),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _cli(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "taskqueue", *args],
        cwd=ROOT,
        env=_env(home),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=BOUND,
    )


def _startup_seconds() -> float:
    """Twice the slowest of three starts of the interpreter up to the point the CLI takes over Ctrl-C."""
    times = []
    for _ in range(3):
        began = time.monotonic()
        subprocess.run([sys.executable, "-c", "import taskqueue.cli"], cwd=ROOT, env=_env(Path("/nonexistent")),
                       check=True, timeout=BOUND)
        times.append(time.monotonic() - began)
    return 2 * max(times)


def _interrupt(proc: subprocess.Popen[str], how: str) -> str:
    """Stop ``proc`` the way ``how`` says; its stderr."""
    if how == "kill":
        proc.kill()
    else:
        for _ in range(1 if how == "int" else 3):
            try:
                os.kill(proc.pid, signal.SIGINT)
            except ProcessLookupError:
                break
    try:
        _, err = proc.communicate(timeout=BOUND)
    except subprocess.TimeoutExpired:
        proc.kill()
        _, err = proc.communicate()
        pytest.fail(f"seed {SEED}: the client did not end after {how}\n{err}")
    return err


def _assert_starts(home: Path, context: str) -> None:
    """The next command starts the server (or finds it) and reads the queue."""
    migrated = _cli(home, "migrate")
    assert migrated.returncode == 0, f"seed {SEED}, {context}: the next command failed\n{migrated.stderr}"
    result = _cli(home, "stats", "--json")
    assert result.returncode == 0, f"seed {SEED}, {context}: the next command failed\n{result.stderr}"
    assert "total" in json.loads(result.stdout)


def _assert_quiet(err: str, context: str) -> None:
    for marker in ("Traceback", "Exception ignored"):
        assert marker not in err, f"seed {SEED}, {context}:\n{err}"


@pytest.fixture
def root() -> Iterator[Path]:
    """A directory for data homes, outside pytest's own (it makes that one private to root again
    at each session start, and the server's system user must be able to reach its data)."""
    path = Path(tempfile.mkdtemp(prefix="taskqueue-embedded-"))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def homes() -> Iterator[list[Path]]:
    """Data homes made by the test; every server in them is stopped at the end."""
    made: list[Path] = []
    yield made
    for home in made:
        EmbeddedServer(home / "pgdata").stop()


@pytest.mark.slow
def test_interrupting_the_first_start_never_breaks_the_next_one(root: Path, homes: list[Path]) -> None:
    rng = random.Random(SEED)
    startup = _startup_seconds()
    for round_no in range(5):
        home = root / f"h{round_no}"
        homes.append(home)
        how = ("kill", "int", "burst")[round_no % 3]
        proc = _spawn(home, ["stats"])
        time.sleep(startup + rng.uniform(0.0, 2.0))  # somewhere in initdb, pg_ctl start or the first query
        err = _interrupt(proc, how)
        if how != "kill":
            _assert_quiet(err, f"first start, round {round_no}, {how}")
        _assert_starts(home, f"first start, round {round_no}, {how}")
        assert not list(home.glob(".pgdata.init-*")), "an interrupted initdb left its scratch directory"


@pytest.mark.slow
def test_killing_and_interrupting_clients_at_random_moments_never_breaks_the_server(
    root: Path, homes: list[Path]
) -> None:
    rng = random.Random(SEED)
    home = root / "h"
    homes.append(home)
    assert _cli(home, "migrate").returncode == 0
    startup = _startup_seconds()
    for round_no in range(8):
        args = rng.choice(CLIENTS)
        how = rng.choice(("kill", "int", "burst"))
        proc = _spawn(home, args)
        time.sleep(startup + rng.uniform(0.0, 1.5))
        err = _interrupt(proc, how)
        context = f"round {round_no}: {' '.join(args)} then {how}"
        if how != "kill":
            _assert_quiet(err, context)
        _assert_starts(home, context)


def test_a_killed_server_is_started_again_by_the_next_command(root: Path, homes: list[Path]) -> None:
    home = root / "h"
    homes.append(home)
    server = EmbeddedServer(home / "pgdata")
    assert _cli(home, "migrate").returncode == 0
    pid = server.status().pid
    assert pid is not None
    os.kill(pid, signal.SIGKILL)  # postmaster.pid stays behind, naming a dead process
    _assert_starts(home, "after SIGKILL of the server")
    assert server.status().pid not in (None, pid)


def test_status_and_stop_report_the_server(root: Path, homes: list[Path]) -> None:
    home = root / "h"
    homes.append(home)
    before = _cli(home, "embedded", "status")
    assert before.returncode == 3 and "not created yet" in before.stdout
    started = _cli(home, "embedded", "start")
    assert started.returncode == 0 and started.stdout.startswith("postgresql://"), started.stderr
    status = _cli(home, "embedded", "status", "--json")
    data = json.loads(status.stdout)
    assert status.returncode == 0 and data["running"] and data["dsn"] == started.stdout.strip()
    stopped = _cli(home, "embedded", "stop")
    assert stopped.returncode == 0 and "stopped" in stopped.stdout, stopped.stderr
    after = _cli(home, "embedded", "status")
    assert after.returncode == 3 and "stopped" in after.stdout
    again = _cli(home, "embedded", "stop")
    assert again.returncode == 0 and "was not running" in again.stdout


def test_the_state_an_interrupted_old_client_left_behind_still_starts(root: Path, homes: list[Path]) -> None:
    """The reported wedge: pgserver's pid list emptied by a Ctrl-C during its atexit rewrite."""
    home = root / "h"
    homes.append(home)
    assert _cli(home, "migrate").returncode == 0
    EmbeddedServer(home / "pgdata").stop()
    (home / "pgdata" / ".handle_pids.json").write_text("")  # what the interrupted rewrite left
    _assert_starts(home, "empty .handle_pids.json, server stopped")
    (home / "pgdata" / ".handle_pids.json").write_text("[999999]")  # a SIGKILLed client's stale pid
    _assert_starts(home, "stale pid in .handle_pids.json, server running")
