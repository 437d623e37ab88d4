"""Ending or extending a claim finds its row by the primary key, whatever is running.

Statistics gathered while nothing runs (a quiet moment, a fresh table) make
ix_tasks_running look empty. A statement that tested ``state = 'running'``
next to its id and token then read that whole index instead of the primary
key: with thousands of tasks running, every completion, heartbeat and
failure read all of them. Each statement below runs under EXPLAIN (ANALYZE,
BUFFERS) in exactly that situation, as prepared (generic) and as one-off
(custom) plans, and must touch a handful of buffers.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from taskqueue.db import PYFORMAT
from taskqueue.testing.database import Server, fresh_database

RUNNING = 5_000
BUDGET = 60  # shared buffers for one row by id: index descent, heap page, the pool and estimate rows

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def running_dsn(taskqueue_server: Server, taskqueue_template: str) -> Iterator[str]:
    """RUNNING tasks running, 1,000 queued, and statistics taken before any of them ran."""
    with fresh_database(taskqueue_server, taskqueue_template) as dsn:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(
                "INSERT INTO taskqueue.tasks (queue, payload, priority, required, state, max_attempts) "
                "SELECT 'default', '{}'::jsonb, 0, 1, 'queued', 3 FROM generate_series(1, %s) g",
                (RUNNING + 1_000,),
            )
            conn.execute("VACUUM ANALYZE taskqueue.tasks")
            conn.execute(
                "UPDATE taskqueue.tasks SET state = 'running', worker = 'w', started_at = now(), "
                "lease_token = gen_random_uuid(), lease_seconds = 60, lease_expires_at = now() + interval '1 day', "
                "attempts = 1 WHERE id <= %s",
                (RUNNING,),
            )
        yield dsn


def _claim_of(conn: psycopg.Connection[Any], task_id: int) -> str:
    row = conn.execute("SELECT lease_token::text FROM taskqueue.tasks WHERE id = %s", (task_id,)).fetchone()
    assert row is not None and row[0] is not None
    return str(row[0])


def _params(name: str, task_id: int, token: str) -> dict[str, Any]:
    one = {"id": task_id, "token": token}
    return {
        "heartbeat_task": {**one, "lease": 30.0},  # 30 s, down from a day
        "heartbeat_tasks": {"ids": [task_id], "tokens": [token], "lease": 30.0},
        "complete_task": {**one, "result": json.dumps(1), "sample": 8, "channel": "taskqueue_wakeup"},
        "complete_task_alone": {**one, "result": None},
        "complete_tasks": {"ids": [task_id], "tokens": [token], "results": [None]},
        "fail_task": {**one, "error": "boom", "retry": True, "retry_in": 0.0, "channel": "taskqueue_wakeup"},
        "requeue_task": {**one, "error": "shutdown", "channel": "taskqueue_wakeup"},
    }[name]


def _buffers(node: dict[str, Any]) -> int:
    return int(node.get("Shared Hit Blocks", 0)) + int(node.get("Shared Read Blocks", 0))


def _indexes(node: dict[str, Any]) -> set[str]:
    found = {node["Index Name"]} if "Index Name" in node else set()
    for child in node.get("Plans", []):
        found |= _indexes(child)
    return found


STATEMENTS = ["heartbeat_task", "heartbeat_tasks", "complete_task", "complete_task_alone", "complete_tasks",
              "fail_task", "requeue_task"]


@pytest.mark.parametrize("plan_mode", ["force_generic_plan", "force_custom_plan"])
@pytest.mark.parametrize("name", STATEMENTS)
def test_ending_a_claim_reads_one_row_not_every_running_task(running_dsn: str, name: str, plan_mode: str) -> None:
    task_id = RUNNING // 2
    with psycopg.connect(running_dsn) as conn:
        conn.execute("SELECT set_config('search_path', 'taskqueue', false)")
        conn.execute("SELECT set_config('plan_cache_mode', %s, false)", (plan_mode,))
        token = _claim_of(conn, task_id)
        sql = "EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) " + PYFORMAT[name]
        row = conn.execute(sql, _params(name, task_id, token), prepare=True).fetchone()
        # The statement did its work (the row matched), then everything is rolled back.
        changed = conn.execute("SELECT lease_token IS DISTINCT FROM %s::uuid OR lease_expires_at < now() + "
                               "interval '1 hour' FROM taskqueue.tasks WHERE id = %s", (token, task_id)).fetchone()
        conn.rollback()
    assert row is not None and changed is not None
    plan = row[0][0]["Plan"]
    assert changed[0], f"{name} did not match the claim it was given"
    assert "ix_tasks_running" not in _indexes(plan), f"{name} read ix_tasks_running: {_indexes(plan)}"
    assert _buffers(plan) < BUDGET, f"{name} touched {_buffers(plan)} buffers with {RUNNING} tasks running"
