"""The ``taskqueue`` command, driven for real with ``python -m taskqueue`` in a subprocess."""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from taskqueue import TaskQueue

REPO = Path(__file__).resolve().parent.parent


def run_cli(*args: str, dsn: str | None = None, stdin: str | None = None, env: dict[str, str] | None = None,
            timeout: float = 60) -> subprocess.CompletedProcess[str]:
    environ = {k: v for k, v in os.environ.items() if k not in ("TASKQUEUE_DSN", "TASKQUEUE_SCHEMA")}
    if dsn is not None:
        environ["TASKQUEUE_DSN"] = dsn
    environ.update(env or {})
    return subprocess.run(
        [sys.executable, "-m", "taskqueue", *args],
        cwd=REPO,
        env=environ,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def assert_one_line_error(result: subprocess.CompletedProcess[str], code: int, fragment: str) -> None:
    assert result.returncode == code, (result.returncode, result.stdout, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: "), lines
    assert fragment in lines[0], lines[0]
    assert "Traceback" not in result.stderr + result.stdout
    assert "╭" not in result.stderr  # no boxed panels


# -- help and usage errors --------------------------------------------------


def test_help_lists_every_command() -> None:
    result = run_cli("--help")
    assert result.returncode == 0, result.stderr
    for command in ("migrate", "enqueue", "worker", "stats", "tasks", "pools", "rescue", "cancel", "demo"):
        assert command in result.stdout


def test_no_arguments_prints_help() -> None:
    result = run_cli()
    assert result.returncode == 0
    assert "Commands" in result.stdout


def test_unknown_command_is_one_line_usage_error() -> None:
    assert_one_line_error(run_cli("frobnicate"), 2, "No such command")


def test_bad_option_value_is_one_line_usage_error(dsn: str) -> None:
    assert_one_line_error(run_cli("enqueue", "{}", "--priority", "high", dsn=dsn), 2, "--priority")


def test_bad_json_payload_is_one_line_error(dsn: str) -> None:
    assert_one_line_error(run_cli("enqueue", "{not json", dsn=dsn), 2, "not valid JSON")


def test_negative_size_is_one_line_error_and_writes_nothing(dsn: str, tq: TaskQueue) -> None:
    assert_one_line_error(run_cli("enqueue", "{}", "--required", "-1", dsn=dsn), 2, "required")
    assert tq.stats().total == 0


def test_unreachable_dsn_is_one_line_error() -> None:
    result = run_cli("stats", dsn="postgresql://nobody@127.0.0.1:1/none?connect_timeout=2")
    assert_one_line_error(result, 1, "cannot reach the database")


def test_missing_schema_tells_to_migrate(dsn: str) -> None:
    assert_one_line_error(run_cli("stats", "--schema", "never_migrated", dsn=dsn), 1, "taskqueue migrate")


def test_worker_target_that_is_not_a_worker(dsn: str) -> None:
    assert_one_line_error(run_cli("worker", "json:dumps", dsn=dsn), 2, "not a taskqueue.Worker")
    assert_one_line_error(run_cli("worker", "no_such_module_xyz:w", dsn=dsn), 2, "no_such_module_xyz")
    assert_one_line_error(run_cli("worker", "nocolon", dsn=dsn), 2, "MODULE:ATTR")


@pytest.mark.parametrize("flag", ["--async-concurrency", "--claim-ahead"])
def test_worker_budget_flags(flag: str) -> None:
    app = "tests.support.worker_app:worker"
    bad = run_cli("worker", app, flag, "-1", dsn="postgresql://nobody@127.0.0.1:1/none")
    assert bad.returncode == 2 and flag in bad.stderr
    # Accepted and applied before the database is asked for (so it reaches the connection error).
    unreachable = "postgresql://nobody@127.0.0.1:1/none?connect_timeout=2"
    assert_one_line_error(run_cli("worker", app, flag, "7", dsn=unreachable), 1, "cannot reach the database")


# -- migrate and the DSN sources ---------------------------------------------


def test_migrate_then_use_with_dsn_in_every_position(empty_dsn: str) -> None:
    assert run_cli("stats", dsn=empty_dsn).returncode == 1  # not migrated yet
    result = run_cli("migrate", "--dsn", empty_dsn)
    assert result.returncode == 0, result.stderr
    before = run_cli("--dsn", empty_dsn, "enqueue", '{"a": 1}')
    after = run_cli("enqueue", '{"a": 2}', "--dsn", empty_dsn)
    from_env = run_cli("enqueue", '{"a": 3}', dsn=empty_dsn)
    ids = [int(r.stdout.split()[-1]) for r in (before, after, from_env)]
    assert len(set(ids)) == 3
    with TaskQueue(empty_dsn) as tq:
        assert sorted(t.payload["a"] for t in tq.tasks()) == [1, 2, 3]


# -- enqueue -----------------------------------------------------------------


def test_enqueue_prints_id_as_last_word_with_every_option(dsn: str, tq: TaskQueue) -> None:
    result = run_cli(
        "enqueue", '{"target": "10.1.2.3"}', "--queue", "scan", "--priority", "2", "--required", "4",
        "--pool", "10.1.2.0/24", "--max-attempts", "5", "--dedupe-key", "k1", dsn=dsn,
    )
    assert result.returncode == 0, result.stderr
    task_id = int(result.stdout.split()[-1])
    task = tq.get(task_id)
    assert task is not None
    assert (task.queue, task.priority, task.required, task.pool, task.max_attempts, task.dedupe_key) == (
        "scan", 2, 4, "10.1.2.0/24", 5, "k1"
    )
    assert task.payload == {"target": "10.1.2.3"}
    again = run_cli("enqueue", '{"x": 1}', "--queue", "scan", "--dedupe-key", "k1", dsn=dsn)
    assert int(again.stdout.split()[-1]) == task_id


def test_enqueue_with_delay_is_scheduled(dsn: str, tq: TaskQueue) -> None:
    result = run_cli("enqueue", "{}", "--delay", "3600", dsn=dsn)
    task = tq.get(int(result.stdout.split()[-1]))
    assert task is not None and task.state == "scheduled"
    assert (task.run_at - task.created_at).total_seconds() == pytest.approx(3600, abs=1)


def test_enqueue_file_loads_every_line(dsn: str, tq: TaskQueue, tmp_path: Path) -> None:
    path = tmp_path / "tasks.jsonl"
    lines = [
        json.dumps({"payload": {"i": i}, "queue": "bulk", "priority": i % 4, "required": i % 3,
                    "pool": f"10.0.{i % 5}.0/24"})
        for i in range(12_000)
    ]
    lines.insert(10, "")  # blank lines are skipped
    lines.append(json.dumps({"payload": "later", "queue": "bulk", "run_at": "2099-01-01T00:00:00Z"}))
    path.write_text("\n".join(lines) + "\n")
    result = run_cli("enqueue", "--file", str(path), "--batch-size", "5000", dsn=dsn)
    assert result.returncode == 0, result.stderr
    assert "12001" in result.stdout
    stats = tq.stats()
    assert stats.by_queue["bulk"]["queued"] == 12_000
    assert stats.by_queue["bulk"]["scheduled"] == 1
    assert {t.pool for t in tq.tasks(queue="bulk", state="queued", limit=20)} == {f"10.0.{i}.0/24" for i in range(5)}


def test_enqueue_file_with_bad_lines_reports_each_and_writes_nothing(dsn: str, tq: TaskQueue, tmp_path: Path) -> None:
    good = json.dumps({"payload": {"ok": True}})
    rows = [good] * 6000  # more than one batch of good lines before the bad ones
    rows += [
        "{not json",                                    # 6001
        json.dumps({"payload": 1, "required": -3}),     # 6002
        good,                                           # 6003
        json.dumps([1, 2]),                             # 6004
        json.dumps({"queue": "no payload"}),            # 6005
        json.dumps({"payload": 1, "colour": "red"}),    # 6006
        json.dumps({"payload": 1, "run_at": "soon"}),   # 6007
    ]
    path = tmp_path / "bad.jsonl"
    path.write_text("\n".join(rows) + "\n")
    result = run_cli("enqueue", "--file", str(path), dsn=dsn)
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    errors = result.stderr.strip().splitlines()
    for number in (6001, 6002, 6004, 6005, 6006, 6007):
        assert any(line.startswith(f"error: line {number}:") for line in errors), (number, errors)
    assert "6003" not in " ".join(line for line in errors if line.startswith("error: line"))
    assert errors[-1].startswith("error: 6 bad lines") and "nothing was written" in errors[-1]
    assert "6001, 6002, 6004, 6005, 6006, 6007" in errors[-1]
    assert tq.stats().total == 0


def test_enqueue_file_from_stdin_with_option_defaults_and_missing_file(dsn: str, tq: TaskQueue) -> None:
    lines = '{"payload": 1}\n{"payload": 2, "queue": "own", "priority": 0}\n'
    result = run_cli("enqueue", "--file", "-", "--queue", "bulk", "--priority", "3", dsn=dsn, stdin=lines)
    assert result.returncode == 0, result.stderr
    got = {t.payload: (t.queue, t.priority) for t in tq.tasks()}
    assert got == {1: ("bulk", 3), 2: ("own", 0)}
    assert_one_line_error(run_cli("enqueue", "--file", "/nonexistent/x.jsonl", dsn=dsn), 2, "no such file")


# -- inspection --------------------------------------------------------------


def test_stats_tasks_and_show(dsn: str, tq: TaskQueue) -> None:
    ids = [tq.enqueue({"n": i}, queue="a" if i < 3 else "b", priority=i) for i in range(5)]
    claimed = tq.claim(queues=["a"])
    assert claimed is not None

    stats = json.loads(run_cli("stats", "--json", dsn=dsn).stdout)
    assert stats["by_state"]["queued"] == 4 and stats["by_state"]["running"] == 1
    assert stats["by_queue"]["b"]["queued"] == 2

    table = run_cli("stats", dsn=dsn)
    assert table.returncode == 0 and "waiting by priority" in table.stdout
    assert "parked 0" in table.stdout and stats["parked"] == 0

    listed = json.loads(run_cli("tasks", "--queue", "a", "--state", "queued", "--json", dsn=dsn).stdout)
    assert sorted(t["id"] for t in listed) == sorted(set(ids[:3]) - {claimed.id})
    assert all("lease_token" not in t for t in listed)
    assert len(json.loads(run_cli("tasks", "--limit", "2", "--json", dsn=dsn).stdout)) == 2
    assert str(ids[4]) in run_cli("tasks", dsn=dsn).stdout

    shown = json.loads(run_cli("tasks", "show", str(claimed.id), "--json", dsn=dsn).stdout)
    assert shown["state"] == "running" and shown["payload"] == {"n": claimed.payload["n"]}
    assert "lease_token" not in shown
    assert "running" in run_cli("tasks", "show", str(claimed.id), dsn=dsn).stdout
    assert_one_line_error(run_cli("tasks", "show", "999999", dsn=dsn), 1, "no task 999999")
    assert_one_line_error(run_cli("tasks", "--state", "bogus", dsn=dsn), 2, "--state")


def test_pools_set_list_unset(dsn: str, tq: TaskQueue) -> None:
    assert run_cli("pools", "set", "10.9.9.0/24", "2", dsn=dsn).returncode == 0
    listed = json.loads(run_cli("pools", "--json", dsn=dsn).stdout)
    assert listed == [{"name": "10.9.9.0/24", "limit": 2, "running": 0, "parked": 0}]
    assert "10.9.9.0/24" in run_cli("pools", dsn=dsn).stdout
    assert run_cli("pools", "unset", "10.9.9.0/24", dsn=dsn).returncode == 0
    pool = tq.pool("10.9.9.0/24")
    assert pool is not None and pool.limit is None
    assert run_cli("pools", "set", "p", "-1", dsn=dsn).returncode == 2


# -- operator actions ---------------------------------------------------------


def test_cancel(dsn: str, tq: TaskQueue) -> None:
    waiting = tq.enqueue({"w": 1})
    result = run_cli("cancel", str(waiting), dsn=dsn)
    assert result.returncode == 0, result.stderr
    task = tq.get(waiting)
    assert task is not None and task.state == "cancelled"
    assert_one_line_error(run_cli("cancel", str(waiting), dsn=dsn), 1, "already cancelled")
    assert_one_line_error(run_cli("cancel", "424242", dsn=dsn), 1, "no task 424242")

    tq.enqueue({"r": 1}, queue="r")
    running = tq.claim(queues=["r"])
    assert running is not None
    assert "requested" in run_cli("cancel", str(running.id), dsn=dsn).stdout
    task = tq.get(running.id)
    assert task is not None and task.cancel_requested


def test_rescue_requeues_expired_lease(dsn: str, tq: TaskQueue) -> None:
    task_id = tq.enqueue({"x": 1})
    claimed = tq.claim(lease=0.2)
    assert claimed is not None and claimed.id == task_id
    deadline = time.monotonic() + 10
    expires = claimed.lease_expires_at
    assert expires is not None
    while time.monotonic() < deadline:  # the lease runs out on the database's clock
        if tq.stats().database_time > expires:
            break
        time.sleep(0.05)
    result = run_cli("rescue", dsn=dsn)
    assert result.returncode == 0, result.stderr
    rescued = int(result.stdout.split()[-1])
    assert rescued == 1
    task = tq.get(task_id)
    assert task is not None and task.state in ("queued", "scheduled")


def test_stats_watch_json_streams_until_interrupted(dsn: str, tq: TaskQueue) -> None:
    import signal

    tq.enqueue({"w": 1})
    environ = {k: v for k, v in os.environ.items() if k != "TASKQUEUE_SCHEMA"}
    environ["TASKQUEUE_DSN"] = dsn
    proc = subprocess.Popen(
        [sys.executable, "-m", "taskqueue", "stats", "--json", "--watch", "--interval", "0.2"],
        cwd=REPO, env=environ, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    try:
        assert proc.stdout is not None
        first = json.loads(proc.stdout.readline())
        tq.enqueue({"w": 2})
        deadline = time.monotonic() + 30
        latest = first
        while latest["total"] < 2 and time.monotonic() < deadline:
            latest = json.loads(proc.stdout.readline())
        assert first["total"] == 1 and latest["total"] == 2
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=20) == 0
        assert "Traceback" not in (proc.stderr.read() if proc.stderr else "")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_ctrl_c_while_the_commands_load_is_one_line() -> None:
    """A SIGINT that lands while the command modules are imported (before any command runs)."""
    code = (
        "import builtins, os, signal\n"
        "from taskqueue.cli import main\n"
        "real = builtins.__import__\n"
        "def importing(name, *args, **kwargs):\n"
        "    if name == 'app':\n"
        "        os.kill(os.getpid(), signal.SIGINT)\n"
        "    return real(name, *args, **kwargs)\n"
        "builtins.__import__ = importing\n"
        "main(['--help'])\n"
    )
    result = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert result.returncode == 130, result
    assert result.stderr == "error: interrupted\n"
    assert "Traceback" not in result.stdout
