"""A single claim whose task the buckets found starts it in one statement (claim_tasks v16).

Outside the look (descending order; lists of several queues), a claim that
asked the buckets took its task with take_task (a PL/pgSQL call that locks
the row) and then started it with the final UPDATE. Version 16 locks and
starts a task with no pool in one statement, as the look does. A pooled
task still goes through take_task, which takes its pool's slot.
"""

from __future__ import annotations

import psycopg
import pytest

from tests.test_claim_desc_lost import _fits_in_claim_order as fits_in_claim_order
from tests.test_claim_desc_lost import _seed as seed_deadlines
from tests.test_claim_plan import _calls_in_transaction
from tests.test_claim_small_step import skip_step_s

pytestmark = pytest.mark.slow

CLAIM = "SELECT id FROM claim_tasks(4, 1, NULL, 'w', 60, true)"  # 4 available, descending


def _seed(conn: psycopg.Connection, pool: str | None = None) -> list[int]:
    """test_claim_desc_lost's shape (3,000 tasks), with a pool of limit 5 if named; the first 10 fits in claim order."""
    seed_deadlines(conn, rows=3000, pool=pool)
    if pool is not None:
        conn.execute(
            "INSERT INTO pools (name, running_limit) VALUES (%s, 5) ON CONFLICT (name) DO UPDATE SET running_limit = 5",
            (pool,),
        )
    return fits_in_claim_order(conn, 4, 10)


def test_a_task_with_no_pool_is_started_without_take_task(dsn: str) -> None:
    """The general way (step S skipped, as after a full pool's fit)."""
    with psycopg.connect(dsn) as conn:
        fits = _seed(conn)
        conn.commit()
        skip_step_s(conn)
        row = conn.execute(
            "SELECT id, state, attempts, worker, lease_token IS NOT NULL, lease_expires_at > now() "
            "FROM claim_tasks(4, 1, NULL, 'w', 60, true)"
        ).fetchone()
        conn.rollback()
        ids, calls = _calls_in_transaction(conn, CLAIM)
    assert row == (fits[0], "running", 1, "w", True, True)
    assert ids == [fits[0]]
    assert calls.get("fit_candidate") == 1 and "take_task" not in calls, calls


def test_a_locked_task_is_passed_over_for_the_next_fit(dsn: str) -> None:
    with psycopg.connect(dsn) as conn, psycopg.connect(dsn) as other:
        fits = _seed(conn)
        conn.commit()
        other.execute("SELECT set_config('search_path', 'taskqueue', false)")
        other.execute("SELECT id FROM tasks WHERE id = %s FOR UPDATE", (fits[0],))
        ids, _ = _calls_in_transaction(conn, CLAIM)
        other.rollback()
    assert ids == [fits[1]]


def test_a_pooled_task_still_takes_its_pool_slot(dsn: str) -> None:
    """The general way (step S skipped: it takes a pooled task's slot in its own statement)."""
    with psycopg.connect(dsn) as conn:
        fits = _seed(conn, pool="p-one-statement")
        conn.commit()
        skip_step_s(conn)
        ids = [r[0] for r in conn.execute(CLAIM).fetchall()]
        running = conn.execute("SELECT running FROM pools WHERE name = 'p-one-statement'").fetchone()
        conn.rollback()
        _, calls = _calls_in_transaction(conn, CLAIM)
    assert ids == [fits[0]]
    assert running == (1,)
    assert calls.get("take_task") == 1, calls
