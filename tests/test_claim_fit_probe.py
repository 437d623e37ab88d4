"""A claim's first dry look over every queue counts the fits for step F's hint (claim_tasks v39, migration 0054).

Over many queues with few fits at the far end of the claim order, the walk
along the shared order reached each fit before any claim asked
fit_candidate, so no read ever said the fits were few and every claim
walked (the wide random draw's w16: 60 ms a claim at 200,000 tasks). The
first dry look (and a look the session's count of queues lets walk far)
now counts the fits in one range of ix_tasks_fit_any_exact within a budget
(128 rows, then 512, then 1,024 while the count runs past it; since
migration 0056 only a count past 1,024 skips calls, the next 255); found
few, the claim goes
on from the first of them. What is claimed must stay the plain rule's task
whichever way it is found.
"""

from __future__ import annotations

import psycopg
import pytest

from tests.test_claim_plan import explain

AVAILABLE = 500
SCANS = "SELECT pg_stat_get_xact_numscans('ix_tasks_fit_any_exact'::regclass)"


def _seed(conn: psycopg.Connection, fits: int, rows: int = 20_000, queues: int = 300,
          descending: bool = False) -> dict[int, tuple[int, int]]:
    """Every task its own priority; the fits (``fits`` of them) are the last in claim order, the rest too big."""
    conn.execute("SELECT set_config('search_path', 'taskqueue', false)")
    conn.execute(
        "INSERT INTO tasks (queue, payload, priority, required, state, max_attempts) "
        "SELECT 'q' || (g * 7919 %% %s), '{}', CASE WHEN %s THEN -g ELSE g END, "
        "       CASE WHEN g > %s THEN 1 + g %% %s ELSE %s + 1 + g %% 1000 END, 'queued', 3 "
        "  FROM generate_series(1, %s) g",
        (queues, descending, rows - fits, AVAILABLE, AVAILABLE, rows))
    conn.execute("ANALYZE tasks")
    return {i: (p, r) for i, p, r in conn.execute("SELECT id, priority, required FROM tasks")}


def _plain(rows: dict[int, tuple[int, int]], descending: bool) -> int | None:
    fits = sorted(((-p if descending else p), i) for i, (p, r) in rows.items() if r <= AVAILABLE)
    return fits[0][1] if fits else None


def _claim_all(conn: psycopg.Connection, rows: dict[int, tuple[int, int]], descending: bool,
               claims: int) -> list[tuple[str, str, int]]:
    """``claims`` claims, each checked against the plain rule and completed; (fit_scan, fit_probe, scans) after each."""
    seen = []
    for _ in range(claims):
        with conn.transaction():
            before = conn.execute(SCANS).fetchone()[0]
            got = conn.execute("SELECT id FROM claim_tasks(%s, 1, NULL, 'w', 60, %s)",
                               (AVAILABLE, descending)).fetchone()
            scans = conn.execute(SCANS).fetchone()[0] - before
        assert (got[0] if got else None) == _plain(rows, descending)
        if got is None:
            break
        conn.execute("UPDATE tasks SET state = 'done', finished_at = now(), lease_token = NULL, "
                     "lease_expires_at = NULL WHERE id = %s", (got[0],))
        del rows[got[0]]
        seen.append((*conn.execute("SELECT current_setting('taskqueue.fit_scan', true), "
                                   "current_setting('taskqueue.fit_probe', true)").fetchone(), scans))
    return seen


@pytest.mark.parametrize("descending", [False, True])
def test_few_fits_past_a_long_walk_make_the_next_claims_take_step_f(dsn: str, descending: bool) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        rows = _seed(conn, 60, descending=descending)
        seen = _claim_all(conn, rows, descending, 30)
        budget = conn.execute("SELECT current_setting('taskqueue.fit_budget', true)").fetchone()[0]
    assert len(seen) == 30
    # The first claim's count found the 60 fits few (within 128 rows), and gave step F a budget of 1,024 ...
    assert seen[0][0] == f"few:{AVAILABLE}", seen[0]
    assert budget == "1024"
    # ... and every later claim is step F's: its one range, and the hint holds.
    assert all(s == (f"few:{AVAILABLE}", seen[0][1], 1) for s in seen[1:]), seen


def test_a_count_past_its_budget_grows_it_for_the_next_claim(dsn: str) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        rows = _seed(conn, 300)
        seen = _claim_all(conn, rows, False, 40)
    assert len(seen) == 40
    # 300 fits: past the first budget of 128, so the next count may read 512 ...
    assert seen[0][0] != f"few:{AVAILABLE}" and seen[0][1] == "512:0", seen[0]
    # ... and the next claim makes it (count_few_fits v2 skips no call below 1,024; v1 skipped the next 2,
    # whose claims walked), finds them few, and from then on step F takes them, one range a claim.
    assert seen[1][:2] == (f"few:{AVAILABLE}", "512:0"), seen[1]
    assert all(s[0] == f"few:{AVAILABLE}" and s[2] == 1 for s in seen[2:]), seen[2:]


def test_the_count_adds_a_bounded_read_to_a_sessions_first_claim(dsn: str) -> None:
    """Many fits (10,000 here, behind 10,000 tasks too big): the count reads its first budget, 129 index rows,
    and no more. Against the same claim with the count skipped, warm both (the first calls plan)."""
    with psycopg.connect(dsn) as conn:
        _seed(conn, 10_000)
        conn.commit()
        with psycopg.connect(dsn, autocommit=True) as vac:
            vac.execute("VACUUM ANALYZE taskqueue.tasks")
        sql = f"SELECT * FROM claim_tasks({AVAILABLE}, 1, NULL, 'w', 60, false)"
        buffers = {}
        for probe in ("", "128:5") * 3:  # each explain is rolled back, its settings with it
            conn.execute("SELECT set_config('taskqueue.fit_probe', %s, false)", (probe,))
            conn.commit()
            buffers[probe], plan = explain(conn, sql)
            assert plan["Actual Rows"] == 1
        after = []
        for probe in ("", "1024:0"):  # past the largest budget, the count is skipped for longer
            conn.execute("SELECT set_config('taskqueue.fit_probe', %s, false)", (probe,))
            assert len(conn.execute(sql.replace("*", "id")).fetchall()) == 1
            after.append(conn.execute("SELECT current_setting('taskqueue.fit_probe', true)").fetchone()[0])
            conn.rollback()
    assert after == ["512:0", "1024:255"]
    # 129 rows of one index range: a few leaf pages, or a heap page a row where the visibility map is unset.
    assert buffers[""] - buffers["128:5"] < 160, buffers


@pytest.mark.parametrize("held", [10, 40])
def test_step_f_passes_over_fits_held_elsewhere(dsn: str, held: int) -> None:
    """Another transaction holds the first ``held`` fits in claim order (as 8 consumers on the same few fits
    do). Step F takes the first one no one holds, from its list of 32 (claim_tasks v41; it read 8 before,
    cleared its hint and walked when it lost them all). Past 32 held, the claim counts the fits again at its
    first dry look rather than walk. Either way the task is the plain rule's, and the session keeps its hint."""
    with psycopg.connect(dsn, autocommit=True) as conn, psycopg.connect(dsn) as other:
        rows = _seed(conn, 60)
        _claim_all(conn, rows, False, 1)  # the count finds the 60 fits few: the next claims take step F
        fits = sorted((p, i) for i, (p, r) in rows.items() if r <= AVAILABLE)
        first = [i for _, i in fits[:held]]
        other.execute("SELECT id FROM taskqueue.tasks WHERE id = ANY (%s) FOR UPDATE", (first,))
        with conn.transaction():
            before = conn.execute(SCANS).fetchone()[0]
            got = conn.execute("SELECT id FROM claim_tasks(%s, 1, NULL, 'w', 60, false)", (AVAILABLE,)).fetchone()
            scans = conn.execute(SCANS).fetchone()[0] - before
        assert got == (fits[held][1],)
        assert conn.execute("SELECT current_setting('taskqueue.fit_scan', true)").fetchone() == (f"few:{AVAILABLE}",)
        # Within the list, one read of the fits; past it, that read, the count and the read of the first fit.
        assert scans == (1 if held < 32 else 3), scans
        other.rollback()
