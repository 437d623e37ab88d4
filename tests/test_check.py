"""The invariant checker: each check finds a deliberately corrupted state, the
SQL views report the same rows, and repair fixes what can be fixed.

The table's CHECK constraints already forbid some corruptions (a running task
without a lease, a finished task with one, attempts over the maximum); those
tests drop the constraint first, as a botched manual edit or migration would.
"""

from __future__ import annotations

import threading

import pytest
import sqlalchemy as sa

from taskqueue import CheckReport, TaskQueue, ValidationError
from tests.support.apis import tq  # noqa: F401  (the contract runs against both APIs)


def sql(tq: TaskQueue, statement: str, **params: object) -> list[sa.Row]:
    with tq.engine.begin() as conn:
        result = conn.execute(sa.text(statement), params)
        return result.all() if result.returns_rows else []


def drop_check_constraint(tq: TaskQueue, suffix: str) -> None:
    """Drop a CHECK constraint of tasks, found by the end of its name (the prefix may vary)."""
    with tq.engine.begin() as conn:
        name = conn.execute(
            sa.text(
                "SELECT conname FROM pg_constraint WHERE conrelid = 'tasks'::regclass AND conname LIKE :pattern"
            ),
            {"pattern": f"%{suffix}"},
        ).scalar_one()
        conn.execute(sa.text(f'ALTER TABLE tasks DROP CONSTRAINT "{name}"'))


def view_subjects(tq: TaskQueue, severity: str = "violation") -> set[tuple[str, str]]:
    rows = sql(tq, "SELECT check_name, subject FROM invariant_violations WHERE severity = :s", s=severity)
    return {(r.check_name, r.subject) for r in rows}


def report_subjects(report: CheckReport, severity: str = "violation") -> set[tuple[str, str]]:
    groups = report.violations if severity == "violation" else report.warnings
    return {(v.check, r["subject"]) for v in groups for r in v.rows}


def test_clean_queue_is_ok_and_views_are_empty(tq: TaskQueue) -> None:
    tq.set_pool_limit("p", 2)
    ids = [tq.enqueue({"i": i}, pool="p") for i in range(3)]
    task = tq.claim()
    assert task is not None and task.id == ids[0]
    tq.complete(task, "ok")
    tq.claim()
    report = tq.check()
    assert report.ok and report.violations == () and report.warnings == ()
    assert sql(tq, "SELECT * FROM invariant_violations") == []
    assert report.to_dict()["ok"] is True


def test_pool_count_drift_is_found_and_recounted(tq: TaskQueue) -> None:
    for i in range(3):
        tq.enqueue({"i": i}, pool="net-a")
    tq.enqueue({"i": 9}, pool="net-b")
    assert len(tq.claim_many(limit=4)) == 4
    sql(tq, "UPDATE pools SET running = running + 2 WHERE name = 'net-a'")
    sql(tq, "UPDATE pools SET running = 0 WHERE name = 'net-b'")

    report = tq.check()
    assert not report.ok
    assert report_subjects(report) == {("pool_counts", "net-a"), ("pool_counts", "net-b")}
    assert view_subjects(tq) == report_subjects(report)
    (row,) = [r for r in report.of("pool_counts") if r["subject"] == "net-a"]
    assert (row["stored_running"], row["actual_running"]) == (5, 3)

    fixed = tq.check(repair=True)
    assert fixed.ok, fixed
    assert {(r.action, r.subject, r.detail) for r in fixed.repaired} == {
        ("recount_pool", "pool net-a", "running 5 -> 3"),
        ("recount_pool", "pool net-b", "running 0 -> 1"),
    }
    assert report_subjects(CheckReport(fixed.checked_at, fixed.found_before_repair)) == report_subjects(report)
    assert tq.pool("net-a").running == 3 and tq.pool("net-b").running == 1
    assert view_subjects(tq) == set()


def test_running_task_whose_pool_row_vanished(tq: TaskQueue) -> None:
    tq.enqueue({}, pool="gone")
    assert tq.claim() is not None
    sql(tq, "DELETE FROM pools WHERE name = 'gone'")
    report = tq.check()
    assert report_subjects(report) == {("pool_counts", "gone")}
    assert "has no row" in report.violations[0].descriptions[0]
    fixed = tq.check(repair=True)
    assert fixed.ok
    assert tq.pool("gone").running == 1


def test_finished_task_holding_a_lease(tq: TaskQueue) -> None:
    task_id = tq.enqueue({})
    task = tq.claim()
    tq.complete(task)
    drop_check_constraint(tq, "idle_has_no_lease")
    sql(tq, "UPDATE tasks SET lease_token = gen_random_uuid(), lease_expires_at = now() WHERE id = :id", id=task_id)
    report = tq.check()
    assert report_subjects(report) == {("finished_with_lease", f"task {task_id}")}
    assert view_subjects(tq) == report_subjects(report)
    fixed = tq.check(repair=True)
    assert fixed.ok
    assert [(r.action, r.subject) for r in fixed.repaired] == [("clear_lease", f"task {task_id}")]
    assert sql(tq, "SELECT lease_token FROM tasks WHERE id = :id", id=task_id)[0].lease_token is None


def test_running_task_without_lease_is_expired_then_rescued(tq: TaskQueue) -> None:
    task_id = tq.enqueue({}, pool="p")
    assert tq.claim() is not None
    drop_check_constraint(tq, "running_has_lease")
    sql(tq, "UPDATE tasks SET lease_token = NULL, worker = NULL WHERE id = :id", id=task_id)
    report = tq.check()
    assert report_subjects(report) == {("running_without_lease", f"task {task_id}")}
    assert "a lease token, a worker" in report.violations[0].descriptions[0]
    assert view_subjects(tq) == report_subjects(report)
    fixed = tq.check(repair=True)
    assert fixed.ok
    assert [r.action for r in fixed.repaired] == ["expire_lease"]
    assert tq.rescue_expired() == 1
    assert tq.get(task_id).state == "queued" and tq.pool("p").running == 0
    assert tq.check().ok


def test_attempts_over_the_maximum_cannot_be_repaired(tq: TaskQueue) -> None:
    task_id = tq.enqueue({}, max_attempts=2)
    drop_check_constraint(tq, "attempts_in_range")
    sql(tq, "UPDATE tasks SET attempts = 3 WHERE id = :id", id=task_id)
    report = tq.check(repair=True)
    assert not report.ok and report.repaired == ()
    assert report_subjects(report) == {("attempts_exceeded", f"task {task_id}")}
    assert view_subjects(tq) == report_subjects(report)


def test_lowered_pool_limit_is_a_warning_but_over_admission_a_violation(tq: TaskQueue) -> None:
    tq.set_pool_limit("p", 3)
    for i in range(4):
        tq.enqueue({"i": i}, pool="p")
    assert len(tq.claim_many(limit=4)) == 3
    tq.set_pool_limit("p", 1)  # lowered while three run
    report = tq.check()
    assert report.ok
    assert report_subjects(report, "warning") == {("pool_over_limit", "p")}
    assert view_subjects(tq, "warning") == {("pool_over_limit", "p")}
    # The same three tasks, as if claimed after the limit of 1 was set.
    sql(tq, "UPDATE pools SET limit_changed_at = now() - interval '1 hour' WHERE name = 'p'")
    report = tq.check()
    assert report_subjects(report) == {("pool_over_limit", "p")}
    assert report.of("pool_over_limit")[0]["claimed_under_limit"] == 3
    assert view_subjects(tq) == report_subjects(report)
    assert not tq.check(repair=True).ok  # running tasks are never stopped by a repair


def test_overdue_scheduled_task_warning_then_violation(tq: TaskQueue) -> None:
    task_id = tq.enqueue({}, delay=3600)
    sql(tq, "UPDATE tasks SET run_at = now() - interval '1 minute' WHERE id = :id", id=task_id)
    report = tq.check()
    assert report.ok  # nobody claimed since it fell due: a warning
    assert report_subjects(report, "warning") == {("overdue_scheduled", f"task {task_id}")}
    # A task claimed after it fell due proves a claim ran and did not promote it.
    sql(
        tq,
        "INSERT INTO tasks (queue, payload, priority, required, state, max_attempts, attempts, started_at, finished_at)"
        " VALUES ('other', '{}', 0, 0, 'done', 1, 1, now(), now())",
    )
    report = tq.check()
    assert report_subjects(report) == {("overdue_scheduled", f"task {task_id}")}
    assert view_subjects(tq) == report_subjects(report)
    fixed = tq.check(repair=True)
    assert fixed.ok and fixed.warnings == ()
    assert [(r.action, r.subject) for r in fixed.repaired] == [("promote_scheduled", f"task {task_id}")]
    assert tq.get(task_id).state == "queued"


def test_repair_argument_is_validated(tq: TaskQueue) -> None:
    with pytest.raises(ValidationError) as info:
        tq.check(repair="yes")  # type: ignore[arg-type]
    assert info.value.field == "repair"


def test_check_and_repair_never_see_drift_under_load(tq: TaskQueue) -> None:
    """Counts and task states change in one transaction, so any snapshot agrees,
    and a concurrent repair finds nothing to change."""
    tq.set_pool_limit("hot", 2)
    tq.enqueue_many([{"payload": i, "pool": "hot" if i % 2 else "cold"} for i in range(400)])
    stop = threading.Event()
    errors: list[BaseException] = []

    def churn() -> None:
        try:
            while not stop.is_set():
                task = tq.claim()
                if task is None:
                    return
                tq.complete(task)
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=churn) for _ in range(4)]
    for t in threads:
        t.start()
    checks = 0
    while any(t.is_alive() for t in threads) and checks < 200:
        report = tq.check(repair=checks % 5 == 0)
        assert report.ok, report
        assert report.repaired == ()
        checks += 1
    stop.set()
    for t in threads:
        t.join()
    assert errors == []
    assert checks > 0
    assert tq.check().ok


def test_cli_check_reports_repairs_and_exits_by_the_result(tq: TaskQueue, dsn: str) -> None:
    import json
    import os
    import subprocess
    import sys

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        env = {**os.environ, "TASKQUEUE_DSN": dsn, "COLUMNS": "200"}
        return subprocess.run([sys.executable, "-m", "taskqueue", "check", *args], env=env, capture_output=True,
                              text=True, timeout=60)

    tq.enqueue({}, pool="net-a")
    assert tq.claim() is not None
    clean = run()
    assert clean.returncode == 0 and "ok: every invariant holds" in clean.stdout, clean

    sql(tq, "UPDATE pools SET running = 7 WHERE name = 'net-a'")
    found = run()
    assert found.returncode == 1, found
    assert "pool net-a stores running = 7 but has 1 running task(s)" in found.stdout
    as_json = run("--json")
    assert as_json.returncode == 1
    doc = json.loads(as_json.stdout)
    assert doc["ok"] is False and [v["check"] for v in doc["violations"]] == ["pool_counts"]
    assert doc["violations"][0]["rows"][0]["stored_running"] == 7

    fixed = run("--repair", "--json")
    assert fixed.returncode == 0, fixed
    doc = json.loads(fixed.stdout)
    assert doc["ok"] is True
    assert doc["repaired"] == [{"action": "recount_pool", "subject": "pool net-a", "detail": "running 7 -> 1"}]
    assert tq.pool("net-a").running == 1
    assert run().returncode == 0
