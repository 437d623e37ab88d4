"""What the command says in the small cases a newcomer meets first.

Each test is one item of the newcomer report: grouped help with whole
descriptions, dedupe wording (and no wasted id), negative limits, unsetting a
pool that does not exist, the parked column, the revision after migrate, the
pool name of an address, one-line errors without a trailing blank line, and
``--inline`` with handler threads refused before anything is claimed.
"""

from __future__ import annotations

import json

from taskqueue import TaskQueue
from tests.test_cli import assert_one_line_error, run_cli

SECTIONS = {
    "run": {"dashboard", "demo", "enqueue", "pool-of", "simulate", "worker"},
    "inspect": {"check", "stats", "tasks"},
    "admin": {"cancel", "embedded", "migrate", "pools", "rescue", "retry"},
}


def _sections(help_text: str) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    current = None
    for line in help_text.splitlines():
        if line.startswith("Commands ("):
            current = line[len("Commands (") : line.index(")")]
            found[current] = []
        elif current and line.startswith("  ") and not line.startswith("   "):
            found[current].append(line.split()[0])
        elif not line.strip():
            current = None
    return found


def test_help_groups_commands_into_run_inspect_admin_with_whole_descriptions() -> None:
    result = run_cli("--help")
    assert result.returncode == 0, result.stderr
    sections = _sections(result.stdout)
    assert list(sections) == ["run", "inspect", "admin"]
    assert {k: set(v) for k, v in sections.items()} == SECTIONS
    assert all(v == sorted(v) for v in sections.values())
    listing = result.stdout[result.stdout.index("Commands ("):]
    assert "..." not in listing  # click cut descriptions at 45 characters
    assert "(a second signal stops at once)" in " ".join(result.stdout.split())


def test_dedupe_says_the_existing_task_was_returned_and_wastes_no_id(dsn: str, tq: TaskQueue) -> None:
    first = run_cli("enqueue", "{}", "--dedupe-key", "k1", dsn=dsn)
    again = run_cli("enqueue", "{}", "--dedupe-key", "k1", dsn=dsn)
    other = run_cli("enqueue", "{}", dsn=dsn)
    assert first.stdout.startswith("enqueued task ")
    held = int(first.stdout.split()[-1])
    assert again.returncode == 0 and again.stdout.startswith(f"existing task {held} holds dedupe key 'k1'")
    assert int(again.stdout.split()[-1]) == held  # the id is still the last word
    assert int(other.stdout.split()[-1]) == held + 1  # the duplicate drew no id from the sequence


def test_a_negative_pool_limit_is_refused_as_a_limit(dsn: str, tq: TaskQueue) -> None:
    result = run_cli("pools", "set", "p", "-1", dsn=dsn)
    assert_one_line_error(result, 2, "LIMIT")
    assert "No such option" not in result.stderr
    assert tq.pool("p") is None


def test_unset_of_a_missing_pool_says_so_and_creates_nothing(dsn: str, tq: TaskQueue) -> None:
    assert_one_line_error(run_cli("pools", "unset", "nosuch", dsn=dsn), 1, "no pool named 'nosuch'")
    assert tq.pool("nosuch") is None


def test_pools_table_has_a_parked_column(dsn: str, tq: TaskQueue) -> None:
    tq.set_pool_limit("10.7.7.0/24", 0)
    tq.enqueue({}, pool="10.7.7.0/24")
    tq.claim(worker="w")  # a claim round parks the task of the full pool
    header = next(line for line in run_cli("pools", dsn=dsn).stdout.splitlines() if "running" in line)
    assert "parked" in header
    listed = json.loads(run_cli("pools", "--json", dsn=dsn).stdout)
    assert listed == [{"name": "10.7.7.0/24", "limit": 0, "running": 0, "parked": 1}]


def test_migrate_names_the_revision(empty_dsn: str) -> None:
    created = run_cli("migrate", dsn=empty_dsn)
    assert created.returncode == 0, created.stderr
    assert created.stdout.startswith("schema taskqueue created at revision ")
    revision = created.stdout.split("revision ")[1].split()[0]
    again = run_cli("migrate", dsn=empty_dsn)
    assert again.stdout.strip() == f"schema taskqueue was already at revision {revision} (the newest); nothing to do"


def test_pool_of_prints_the_pool_name_and_enqueue_takes_it(dsn: str, tq: TaskQueue) -> None:
    result = run_cli("pool-of", "10.1.2.3", "2001:db8::1")
    assert result.returncode == 0 and result.stdout.split() == ["10.1.2.0/24", "2001:db8::/48"]
    assert_one_line_error(run_cli("pool-of", "not-an-ip"), 2, "not an IPv4 or IPv6 address")
    enqueued = run_cli("enqueue", "{}", "--pool-of", "10.1.2.3", dsn=dsn)
    task = tq.get(int(enqueued.stdout.split()[-1]))
    assert task is not None and task.pool == "10.1.2.0/24"
    assert_one_line_error(run_cli("enqueue", "{}", "--pool", "p", "--pool-of", "10.1.2.3", dsn=dsn), 2, "not both")


def test_a_bad_dsn_is_one_line_without_a_blank_line() -> None:
    result = run_cli("stats", env={"TASKQUEUE_DSN": "not a dsn"})
    assert_one_line_error(result, 2, "not a valid connection string")
    assert result.stderr.endswith("\n") and not result.stderr.endswith("\n\n")


def test_stats_fits_a_120_column_terminal(dsn: str, tq: TaskQueue) -> None:
    tq.enqueue({}, queue="a-queue-with-a-long-name")
    result = run_cli("stats", dsn=dsn, env={"COLUMNS": "120"})
    assert result.returncode == 0, result.stderr
    assert max(len(line) for line in result.stdout.splitlines()) <= 120
    assert "throughput" in result.stdout and "oldest waiting" in result.stdout


def test_inline_with_handler_threads_is_refused_before_any_claim(dsn: str, tq: TaskQueue) -> None:
    task_id = tq.enqueue({"sleep": 0}, queue="work")
    result = run_cli("worker", "tests.support.worker_app:worker", "--inline", "--concurrency", "4", dsn=dsn)
    assert_one_line_error(result, 2, "inline runs one handler at a time")
    task = tq.get(task_id)
    assert task is not None and task.state == "queued" and task.attempts == 0
