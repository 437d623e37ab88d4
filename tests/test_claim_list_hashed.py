"""A claim over a list of queues keeps its rows from the shared walk with a hashed lookup of the list (claim_tasks v29).

The claim's statements run as generic plans, so the list is a parameter, and
PostgreSQL 15 hashes ``queue = ANY (list)`` only when the array is a
constant: every row walked was compared with every listed queue. With 200
queues listed that filter cost five times the walk (``listed_long`` in
bench/shapes.py). v29 writes it ``queue IN (SELECT ... FROM unnest(list))``
inside an OR, which PostgreSQL keeps as a subplan and hashes once per
statement. auto_explain shows the plans of the statements the function ran;
the answer must stay the reference rule's.
"""

from __future__ import annotations

import re

import psycopg
import pytest

from taskqueue import TaskQueue

LISTED = [f"q{i}" for i in range(0, 40, 2)]  # 20 of 40 queues


def _seed(conn: psycopg.Connection) -> None:
    conn.execute("SELECT set_config('search_path', 'taskqueue', false)")
    conn.execute(
        "INSERT INTO tasks (queue, payload, priority, required, state, max_attempts) "
        "SELECT 'q' || g % 40, '{}'::jsonb, (g * 31) % 10, 1 + (g * 7919) % 100, 'queued', 3 "
        "FROM generate_series(1, 4000) g")
    conn.execute("ANALYZE tasks")
    conn.commit()


def _plans(conn: psycopg.Connection, sql: str, params: tuple[object, ...]) -> tuple[list[int], list[str]]:
    """Run a claim with auto_explain logging every nested statement's plan to the client; ids and plans."""
    notices: list[str] = []
    conn.add_notice_handler(lambda d: notices.append(d.message_primary or ""))
    try:
        conn.execute("LOAD 'auto_explain'")
    except psycopg.Error:
        conn.rollback()
        pytest.skip("auto_explain is not available to this role or server")
    conn.execute("SET auto_explain.log_min_duration = 0")
    conn.execute("SET auto_explain.log_nested_statements = on")
    conn.execute("SET client_min_messages = log")
    ids = [r[0] for r in conn.execute(sql, params).fetchall()]
    conn.execute("SET client_min_messages = notice")
    conn.rollback()
    return ids, [n for n in notices if "plan:" in n]


@pytest.mark.parametrize("order", ["min", "max"])
def test_a_listed_claims_walk_filters_by_a_hashed_subplan(dsn: str, order: str) -> None:
    with psycopg.connect(dsn) as conn:
        _seed(conn)
        expected = conn.execute(
            "SELECT id FROM tasks WHERE queue = ANY (%s) AND required <= 50 "
            f"ORDER BY priority {'DESC' if order == 'max' else ''}, id LIMIT 1", (LISTED,)).fetchone()
        conn.commit()
        ids, plans = _plans(conn, "SELECT id FROM claim_tasks(50, 1, %s, 'w', 60, %s)", (LISTED, order == "max"))
    walks = [p for p in plans if "ix_tasks_claim_any" in p and "v_queues" in p]
    assert walks, "the claim walked the order over every queue for its list"
    for plan in walks:
        assert "hashed SubPlan" in plan, plan
        assert not re.search(r"queue\)::text = ANY", plan), plan
    assert expected is not None and ids == [expected[0]]


def test_no_walk_tests_the_list_with_any_of_a_parameter(dsn: str) -> None:
    """Where auto_explain is missing (the embedded server has no contrib
    modules), the installed function's own text says the same: no statement
    compares a row's queue with ``= ANY (v_queues)``; the walks use the
    hashed IN."""
    with psycopg.connect(dsn) as conn:
        body = conn.execute("SELECT pg_get_functiondef('taskqueue.claim_tasks'::regproc)").fetchone()[0]  # type: ignore[index]
    assert "= ANY (v_queues)" not in body
    assert body.count("IN (SELECT u.q FROM unnest(v_queues) AS u(q))") == 4


def test_a_listed_claim_many_takes_what_the_rule_takes(tq: TaskQueue, dsn: str) -> None:
    """A batch over the list through step W's window, the other user of the lookup."""
    with psycopg.connect(dsn) as conn:
        _seed(conn)
        rows = conn.execute("SELECT id, required FROM tasks WHERE queue = ANY (%s) ORDER BY priority, id",
                            (LISTED,)).fetchall()
    left, expected = 300, []
    for task_id, required in rows:
        if required <= left:
            expected.append(task_id)
            left -= required
        if len(expected) == 20:
            break
    got = tq.claim_many(available=300, limit=20, queues=LISTED)
    assert sorted(t.id for t in got) == sorted(expected)
    assert rows  # the list holds tasks
