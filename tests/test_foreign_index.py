"""A user's own index on (priority, id) steers none of the claim's statements.

An operator may index the tasks table for their own queries, and the
benchmark gives the naive query its (priority, id) index on the same
table. fit_candidate v6 probed a bucket with ``level = n AND (priority, id)
> key ORDER BY priority, id``: any (priority, id) index gave that order,
and where every task had one size, the planner's estimates tied. With such
an index present, a claim of 4 over tasks that all need 1 probed the empty
amounts 0, 2, 3 and 4 by walking every queued task (500 ms a call at 1M
tasks). Version 7 leads each probe with its level, which only the level's
own index orders by. claim_tasks' own reads of claim order may still use
such an index: over one queue it walks the same rows as ours, plus parked
ones (measured: no difference on mb_half_pools, see docs/performance-history.md).
"""

from __future__ import annotations

import psycopg
import pytest

from tests.test_claim_plan_shapes import buffers

pytestmark = pytest.mark.slow

USERS_INDEXES = (
    "CREATE INDEX users_claim_order ON tasks (priority, id) WHERE state = 'queued'",
    "CREATE INDEX users_by_priority ON tasks (priority, id)",
    "CREATE INDEX users_by_priority_desc ON tasks (priority DESC, id)",
)


def _seed(conn: psycopg.Connection, rows: int, required: str, priority: str = "0", pool: str = "NULL") -> None:
    conn.execute("SELECT set_config('search_path', 'taskqueue', false)")
    conn.execute(
        "INSERT INTO tasks (queue, payload, priority, required, pool, state, max_attempts) "
        f"SELECT 'default', '{{}}'::jsonb, {priority}, {required}, {pool}, 'queued', 3 "
        "FROM generate_series(1, %s) g",
        (rows,),
    )
    for sql in USERS_INDEXES:
        conn.execute(sql)
    conn.commit()


def _analyze(dsn: str) -> None:
    with psycopg.connect(dsn, autocommit=True) as vac:
        vac.execute("VACUUM ANALYZE taskqueue.tasks")


@pytest.mark.parametrize("descending", [False, True])
def test_a_probe_of_an_amount_no_task_has_reads_a_few_buffers(dsn: str, descending: bool) -> None:
    """20,000 tasks that all need 1; a search for 4 left probes 0..4, four of them empty."""
    with psycopg.connect(dsn) as conn:
        _seed(conn, 20_000, "1")
        _analyze(dsn)
        start = -2147483647 if descending else -2147483648
        found = conn.execute(
            "SELECT id, required FROM fit_candidate('{default}', 4, %s, 0, %s, '{}')", (start, descending)
        ).fetchone()
        conn.rollback()
        n, _ = buffers(dsn, "SELECT * FROM fit_candidate('{default}', 4, %(k)s, 0, %(d)s, '{}')",
                       {"k": start, "d": descending})
    assert found == (1, 1)  # one priority: the oldest task, whatever the order
    assert n < 100, f"{n} buffers: a probe walked another index"  # v6: 1,495 ascending, 1,816 descending


def test_a_claim_whose_head_is_locked_elsewhere_reads_a_few_buffers(dsn: str) -> None:
    """The first 8 tasks are locked by another transaction, so a claim of 4 asks
    fit_candidate from each locked row in turn (8 calls, each probing 0..4)."""
    with psycopg.connect(dsn) as conn, psycopg.connect(dsn) as other:
        _seed(conn, 20_000, "1")
        _analyze(dsn)
        other.execute("SELECT set_config('search_path', 'taskqueue', false)")
        held = [r[0] for r in other.execute("SELECT id FROM tasks ORDER BY id LIMIT 8 FOR UPDATE").fetchall()]
        got = conn.execute("SELECT id FROM claim_tasks(4, 1, '{default}', 'w', 60, false)").fetchall()
        conn.rollback()
        n, _ = buffers(dsn, "SELECT id FROM claim_tasks(4, 1, '{default}', 'w', 60, false)", {})
        other.rollback()
    assert held == list(range(1, 9))
    assert got == [(9,)]
    assert n < 300, f"{n} buffers: a probe walked another index"  # v7: 65; v6: 1,549
