"""A walk of the boundary bucket stops at the best row (fit_candidate v4) and, when it ends short, the search (v6).

The boundary is the fine bucket that holds what is left + 1; fit_candidate
walks it in claim order for a fit better than the best of the whole buckets.
Version 3 filtered the rows at or after that best out only after its LIMIT
had counted them, so a walk of 256 could read 256 rows that could never be
the answer. Here 20 tasks too big sit before the best and 600 after it,
with 10 fitting values of the boundary after it too (so the walk is not cut
short by the visit of values).
"""

from __future__ import annotations

import psycopg
import pytest

from tests.test_claim_plan import explain

pytestmark = pytest.mark.slow

AVAILABLE = 500000  # the boundary: 500,001's fine bucket, [499,712, 500,735]


def _seed(conn: psycopg.Connection, priority: int) -> int:
    """One queue; ids 1..20 too big, id 100 the best (needs 1), then 600 too big and 10 boundary fits.

    The table is filled to a tenth of each page and each row carries 700
    bytes, one row a page, so the rows a walk reads show in its buffer count.
    """
    conn.execute("SELECT set_config('search_path', 'taskqueue', false)")
    conn.execute("ALTER TABLE tasks SET (fillfactor = 10)")
    conn.execute(
        "INSERT INTO tasks (id, queue, payload, priority, required, state, max_attempts) "
        "SELECT g, 'default', jsonb_build_object('pad', repeat('x', 700)), %s, "
        "CASE WHEN g = 100 THEN 1 WHEN g > 700 THEN 499990 + g %% 10 "
        "ELSE 500001 + g %% 100 END, 'queued', 3 FROM generate_series(1, 710) g WHERE g <= 20 OR g >= 100",
        (priority,))
    conn.execute("ANALYZE tasks")
    return 100


@pytest.mark.parametrize("descending", [False, True])
def test_a_boundary_walk_does_not_read_past_the_best_row(dsn: str, descending: bool) -> None:
    with psycopg.connect(dsn) as conn:
        best = _seed(conn, 5)
        conn.commit()
        # From the start of priority 5, where claim_tasks asks once its look has read the head.
        key = -5 if descending else 5
        sql = f"SELECT * FROM fit_candidate(ARRAY['default'], {AVAILABLE}, {key}, 0, {str(descending).lower()}, '{{}}')"
        [(found,)] = conn.execute(sql.replace("*", "id")).fetchall()
        explain(conn, sql)
        buffers, plan = explain(conn, sql)
        conn.rollback()
    assert found == best
    assert plan["Actual Rows"] == 1
    # Version 3 read 16 rows, visited 8 values, then 256 rows more, most past the best: 380 buffers
    # ascending and 446 descending. Version 4 stops at the best: 127 and 195.
    assert buffers < 250, f"{buffers} buffers for a boundary walk that should stop at the best row"


def _seed_short_walk(conn: psycopg.Connection) -> int:
    """One priority: ids 1..10 in the boundary bucket but too big, id 100 the best (needs 1), then 300 boundary fits.

    Every row before the best is in the boundary bucket's first walk (16), so
    that walk reads less than its budget: nothing before the best fits.
    """
    conn.execute("SELECT set_config('search_path', 'taskqueue', false)")
    conn.execute("ALTER TABLE tasks SET (fillfactor = 10)")
    conn.execute(
        "INSERT INTO tasks (id, queue, payload, priority, required, state, max_attempts) "
        "SELECT g, 'default', jsonb_build_object('pad', repeat('x', 700)), 5, "
        "CASE WHEN g = 100 THEN 1 WHEN g <= 10 THEN 500000 + g ELSE 499990 + g % 10 END, 'queued', 3 "
        "FROM generate_series(1, 400) g WHERE g <= 10 OR g >= 100"
    )
    conn.execute("ANALYZE tasks")
    return 100


@pytest.mark.parametrize("descending", [False, True])
def test_a_boundary_walk_that_ends_short_ends_the_search(dsn: str, descending: bool) -> None:
    """fit_candidate v6: in descending order too, a walk of the best's own priority that read less
    than its budget read every row before the best, so the bucket's values are not visited."""
    with psycopg.connect(dsn) as conn:
        best = _seed_short_walk(conn)
        conn.commit()
        key = -5 if descending else 5
        sql = f"SELECT * FROM fit_candidate(ARRAY['default'], {AVAILABLE}, {key}, 0, {str(descending).lower()}, '{{}}')"
        [(found,)] = conn.execute(sql.replace("*", "id")).fetchall()
        explain(conn, sql)
        buffers, _ = explain(conn, sql)
        conn.rollback()
    assert found == best
    # Ascending reads 67 buffers. Descending, version 5 went on to visit the bucket's values and
    # walk again, 173; version 6 stops after the walk, 121 (its bucket probes cost more descents).
    assert buffers < 150, f"{buffers} buffers: the search went on after a walk that read every row before the best"
