"""Statistics taken while the queue was quiet never turn a lookup by id into a walk.

The claim indexes, ix_tasks_running and ix_tasks_errored are partial
indexes. Analyzed while the queue is empty (a quiet night, a new queue),
they look empty to the planner until the next ANALYZE, and a statement
that finds one row by id while testing the state that an index's predicate
names may then read that whole index with a filter on id, because it seems
cheaper than the primary key. After a burst of enqueues every take read a
whole claim index, and with thousands of tasks running every completion
read all of them.

The database here is built that way: statistics first, on an empty queue
with autovacuum off, then a burst of queued tasks, running tasks (some
with expired leases) and failed tasks. Every lookup by id, the claim with
its takes included, runs under EXPLAIN (ANALYZE, BUFFERS) and must stay
within a few buffers per row, as with fresh statistics.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from taskqueue.db import PYFORMAT
from taskqueue.testing.database import Server, fresh_database
from tests.test_claim_plan import shared_buffers

QUEUED = 100_000  # one claim index is about 670 buffers at this size: reading one whole is plain to see
RUNNING = 5_000  # ids QUEUED+1 .. QUEUED+RUNNING; the last EXPIRED of them have expired leases
EXPIRED = 100
FAILED = 2_000
BUDGET = 60  # shared buffers for one row found by id: index descent, heap page, pool and estimate rows
CLAIM_BUDGET = 400  # one claim: the look or the buckets, and the take (about 70 with fresh statistics)
PER_TASK = 150  # a claim of 100, per task taken (about 80 with fresh statistics)

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def stale_dsn(taskqueue_server: Server, taskqueue_template: str) -> Iterator[str]:
    with fresh_database(taskqueue_server, taskqueue_template) as dsn:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute("SET search_path TO taskqueue")
            conn.execute("ALTER TABLE tasks SET (autovacuum_enabled = false)")  # the statistics stay stale
            conn.execute(
                "INSERT INTO tasks (queue, payload, priority, required, state, max_attempts, finished_at) "
                "SELECT 'default', '{}'::jsonb, 0, 1, 'done', 3, now() FROM generate_series(1, 1000)"
            )
            conn.execute("VACUUM ANALYZE tasks")
            conn.execute(
                "INSERT INTO tasks (queue, payload, priority, required, state, max_attempts) "
                "SELECT 'default', '{}'::jsonb, g %% 10, "
                "CASE WHEN g %% 97 = 0 THEN 1 ELSE 1 + (g * 7919) %% 1000000 END, 'queued', 3 "
                "FROM generate_series(1, %s) g",
                (QUEUED,),
            )
            conn.execute(
                "INSERT INTO tasks (queue, payload, priority, required, state, max_attempts, attempts, worker, "
                "started_at, lease_token, lease_seconds, lease_expires_at) "
                "SELECT 'default', '{}'::jsonb, 0, 1, 'running', 3, 1, 'w', now(), gen_random_uuid(), 60, "
                "now() + CASE WHEN g > %s THEN interval '-1 hour' ELSE interval '1 day' END "
                "FROM generate_series(1, %s) g",
                (RUNNING - EXPIRED, RUNNING),
            )
            conn.execute(
                "INSERT INTO tasks (queue, payload, priority, required, state, max_attempts, attempts, finished_at, "
                "error) SELECT 'default', '{}'::jsonb, 0, 1, 'failed', 3, 3, now(), 'boom' FROM generate_series(1, %s)",
                (FAILED,),
            )
        yield dsn


def _plan(dsn: str, sql: str, params: dict[str, Any], plan_mode: str = "auto",
          check: str | None = None) -> tuple[dict[str, Any], Any]:
    """The plan of ``sql`` under EXPLAIN (ANALYZE, BUFFERS), then the row of the query ``check``, then a rollback."""
    with psycopg.connect(dsn) as conn:
        conn.execute("SELECT set_config('search_path', 'taskqueue', false)")
        conn.execute("SELECT set_config('plan_cache_mode', %s, false)", (plan_mode,))
        conn.commit()
        conn.execute("EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) " + sql, params, prepare=True)  # plans, warms
        conn.rollback()
        row = conn.execute("EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) " + sql, params, prepare=True).fetchone()
        answer = None if check is None else conn.execute(check).fetchone()
        conn.rollback()
    assert row is not None
    return row[0][0]["Plan"], answer


def _indexes(node: dict[str, Any]) -> set[str]:
    found = {node["Index Name"]} if "Index Name" in node else set()
    for child in node.get("Plans", []):
        found |= _indexes(child)
    return found


def _running(dsn: str) -> tuple[int, str]:
    with psycopg.connect(dsn) as conn:
        row = conn.execute("SELECT id, lease_token::text FROM taskqueue.tasks WHERE state = 'running' "
                           "AND lease_expires_at > now() ORDER BY id OFFSET 2000 LIMIT 1").fetchone()
    assert row is not None
    return int(row[0]), str(row[1])


def _params(name: str, task_id: int, token: str) -> dict[str, Any]:
    one = {"id": task_id, "token": token}
    return {
        "heartbeat_task": {**one, "lease": 30.0},  # 30 s, down from a day
        "heartbeat_tasks": {"ids": [task_id], "tokens": [token], "lease": 30.0},
        "complete_task": {**one, "result": json.dumps(1), "sample": 8, "channel": "taskqueue_wakeup"},
        "complete_task_alone": {**one, "result": None},
        "complete_task_pooled": {**one, "result": None, "channel": "taskqueue_wakeup"},
        "complete_tasks": {"ids": [task_id], "tokens": [token], "results": [None]},
        "fail_task": {**one, "error": "boom", "retry": True, "retry_in": 0.0, "channel": "taskqueue_wakeup"},
        "requeue_task": {**one, "error": "shutdown", "channel": "taskqueue_wakeup"},
    }[name]


LEASE_STATEMENTS = ["heartbeat_task", "heartbeat_tasks", "complete_task", "complete_task_alone", "complete_task_pooled",
                    "complete_tasks", "fail_task", "requeue_task"]


@pytest.mark.parametrize("plan_mode", ["force_generic_plan", "force_custom_plan"])
@pytest.mark.parametrize("name", LEASE_STATEMENTS)
def test_ending_a_claim_reads_one_row_not_every_running_task(stale_dsn: str, name: str, plan_mode: str) -> None:
    task_id, token = _running(stale_dsn)
    check = (f"SELECT lease_token IS DISTINCT FROM '{token}'::uuid OR lease_expires_at < now() + interval '1 hour' "
             f"FROM tasks WHERE id = {task_id}")
    plan, changed = _plan(stale_dsn, PYFORMAT[name], _params(name, task_id, token), plan_mode, check=check)
    assert changed is not None and changed[0], f"{name} did not match the claim it was given"
    assert "ix_tasks_running" not in _indexes(plan), f"{name} read ix_tasks_running: {_indexes(plan)}"
    assert shared_buffers(plan) < BUDGET, f"{name} touched {shared_buffers(plan)} buffers with {RUNNING} tasks running"


def test_retry_reads_one_row_not_every_failure(stale_dsn: str) -> None:
    with psycopg.connect(stale_dsn) as conn:
        row = conn.execute("SELECT max(id) FROM taskqueue.tasks WHERE state = 'failed'").fetchone()
    assert row is not None
    plan, state = _plan(stale_dsn, PYFORMAT["retry_task"], {"id": row[0]},
                        check=f"SELECT state FROM tasks WHERE id = {int(row[0])}")
    assert state == ("queued",)
    assert "ix_tasks_errored" not in _indexes(plan)
    buffers = shared_buffers(plan)
    assert buffers < BUDGET, f"retry_task touched {buffers} buffers with {FAILED} failed tasks"


def test_rescue_reads_the_expired_rows_not_every_running_task_for_each(stale_dsn: str) -> None:
    plan, left = _plan(stale_dsn, PYFORMAT["rescue_expired_tasks"], {},
                       check="SELECT count(*) FROM tasks WHERE state = 'running' AND lease_expires_at < now()")
    assert plan["Actual Rows"] == EXPIRED and left == (0,)
    # Finding the expired rows reads ix_tasks_running once; each is then updated by its key (about 30
    # buffers a row, with its new entries in the claim indexes), not found by a walk of every running task.
    buffers = shared_buffers(plan)
    assert buffers < 50 * EXPIRED + 500, f"rescue touched {buffers} buffers for {EXPIRED} rows"


CLAIMS = [  # available, limit, queues, descending
    (1, 1, None, False), (1, 1, None, True), (4, 1, ["default"], True), (500_000, 1, None, True),
    (1, 100, None, False), (4, 100, None, True), (500_000, 100, None, False), (500_000, 100, ["default"], True),
    (None, 100, None, False),
]


@pytest.mark.parametrize("available,limit,queues,desc", CLAIMS)
def test_a_claim_after_a_burst_costs_what_it_costs_with_fresh_statistics(
    stale_dsn: str, available: int | None, limit: int, queues: list[str] | None, desc: bool
) -> None:
    plan, _ = _plan(stale_dsn, "SELECT * FROM claim_tasks(%(a)s, %(limit)s, %(queues)s, 'stale', 60, %(desc)s)",
                    {"a": available, "limit": limit, "queues": queues, "desc": desc})
    taken = int(plan["Actual Rows"])
    assert taken >= 1
    budget = CLAIM_BUDGET if limit == 1 else CLAIM_BUDGET + PER_TASK * taken
    assert shared_buffers(plan) < budget, f"a claim of {taken} touched {shared_buffers(plan)} buffers (budget {budget})"
