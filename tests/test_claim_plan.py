"""The claim's cost does not grow with the backlog: it probes ix_tasks_claim and never scans.

EXPLAIN of a PL/pgSQL call shows only the function scan, but its buffer counts
include every statement the function body ran (checked below with a function
that scans on purpose), so they measure the whole claim.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from taskqueue.testing.database import Server, fresh_database

ROWS = 100_000
BUDGET = 3_000  # shared buffers, hit + read: head window (256 rows), bucket probes, boundary walks; a backlog scan needs far more

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def backlog_dsn(taskqueue_server: Server, taskqueue_template: str) -> Iterator[str]:
    """Seed 000's worst case: ~100k queued tasks over 10 priorities that do not fit.

    Built once for the module. Each measurement adds the one task that fits
    (last, at the far end of the walk) and rolls everything back.
    """
    with fresh_database(taskqueue_server, taskqueue_template) as dsn:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(
                "INSERT INTO taskqueue.tasks (queue, payload, priority, required, state, max_attempts) "
                "SELECT 'default', '{}'::jsonb, g %% 10, 100 + g %% 20, 'queued', 3 FROM generate_series(1, %s) g",
                (ROWS,),
            )
            conn.execute("VACUUM ANALYZE taskqueue.tasks")
        yield dsn


@pytest.fixture
def backlog(backlog_dsn: str) -> Iterator[psycopg.Connection]:
    conn = psycopg.connect(backlog_dsn)
    conn.execute("SELECT set_config('search_path', 'taskqueue', false)")
    conn.commit()
    try:
        yield conn
    finally:
        conn.close()


def shared_buffers(node: dict[str, Any]) -> int:
    return int(node.get("Shared Hit Blocks", 0)) + int(node.get("Shared Read Blocks", 0))


def explain(conn: psycopg.Connection, sql: str) -> tuple[int, dict[str, Any]]:
    """Run ``sql`` under EXPLAIN (ANALYZE, BUFFERS) and roll it back."""
    row = conn.execute("EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) " + sql).fetchone()
    conn.rollback()
    assert row is not None
    plan = row[0][0]["Plan"]
    return shared_buffers(plan), plan


def third_run(conn: psycopg.Connection, sql: str) -> tuple[int, int, list[int]]:
    """Buffers and rows of the claim's third run under EXPLAIN (the first two plan and warm up), then its ids."""
    explain(conn, sql)
    explain(conn, sql)
    buffers, plan = explain(conn, sql)
    got = [r[0] for r in conn.execute(sql.replace("*", "id")).fetchall()]
    conn.rollback()
    return buffers, int(plan["Actual Rows"]), got


CLAIM = "SELECT * FROM claim_tasks(%s, 1, %s, 'plan-test', 60, %s)"
FITS = (
    "INSERT INTO tasks (queue, payload, priority, required, state, max_attempts) "
    "VALUES ('default', '{\"fits\": true}', %s, 1, 'queued', 3)"
)


def claim_sql(available: int | None, queues: list[str] | None, desc: bool) -> str:
    return CLAIM % (
        "NULL" if available is None else int(available),
        "NULL" if queues is None else "ARRAY['default']",
        "true" if desc else "false",
    )


def claim_buffers(conn: psycopg.Connection, available: int | None, queues: list[str] | None, desc: bool) -> int:
    """Buffers of one claim that must walk every priority to find the last task, the only one that fits."""
    sql = claim_sql(available, queues, desc)
    far_end = -1 if desc else 10  # past every backlog priority, in the claim's direction
    explain(conn, sql)  # warm the function's plan cache and the catalog
    conn.execute(FITS % far_end)
    row = conn.execute("EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) " + sql).fetchone()
    conn.rollback()
    assert row is not None
    plan = row[0][0]["Plan"]
    assert plan["Node Type"] == "Function Scan" and plan["Actual Rows"] == 1
    return shared_buffers(plan)


def test_function_scan_buffers_include_the_body(backlog: psycopg.Connection) -> None:
    backlog.execute(
        "CREATE FUNCTION pg_temp.scan_all() RETURNS bigint LANGUAGE plpgsql AS "
        "$$ DECLARE n bigint; BEGIN SELECT count(*) INTO n FROM taskqueue.tasks; RETURN n; END $$"
    )
    backlog.commit()
    pages = backlog.execute("SELECT relpages FROM pg_class WHERE oid = 'taskqueue.tasks'::regclass").fetchone()
    explain(backlog, "SELECT pg_temp.scan_all()")
    buffers, _ = explain(backlog, "SELECT * FROM pg_temp.scan_all()")
    heap_pages = max(int(pages[0]) if pages else 0, 500)  # type: ignore[index]
    assert buffers >= heap_pages  # the body's full scan shows up in the function scan


@pytest.mark.parametrize(
    "available,queues,desc",
    [(1, None, False), (1, ["default"], False), (1, None, True), (1, ["default"], True), (None, None, False)],
)
def test_worst_case_claim_stays_within_buffer_budget(
    backlog: psycopg.Connection, available: int | None, queues: list[str] | None, desc: bool
) -> None:
    buffers = claim_buffers(backlog, available, queues, desc)
    assert buffers < BUDGET, f"claim touched {buffers} buffers with {ROWS} queued tasks"


def test_claim_returns_the_only_task_that_fits(backlog: psycopg.Connection) -> None:
    for desc, far_end in ((False, 10), (True, -1)):
        tid = backlog.execute(FITS % far_end + " RETURNING id").fetchone()[0]  # type: ignore[index]
        row = backlog.execute(claim_sql(1, None, desc).replace("*", "id, required")).fetchone()
        backlog.rollback()
        assert row == (tid, 1)


def test_naive_query_walks_far_more(backlog: psycopg.Connection) -> None:
    # The measurement can fail: the plain filter walks every non-fitting row.
    ours = claim_buffers(backlog, 1, None, False)
    backlog.execute(FITS % 10)
    buffers, _ = explain(
        backlog, "SELECT id FROM tasks WHERE state = 'queued' AND required <= 1 ORDER BY priority, id LIMIT 1"
    )
    assert buffers > 3 * ours


def _table_counters(dsn: str) -> tuple[int, int]:
    with psycopg.connect(dsn) as conn:
        conn.execute("SELECT pg_stat_clear_snapshot()")
        seq, idx = conn.execute(
            "SELECT seq_scan, idx_scan FROM pg_stat_user_tables WHERE schemaname = 'taskqueue' AND relname = 'tasks'"
        ).fetchone()  # type: ignore[misc]
    return int(seq), int(idx)


def test_claim_uses_indexes_and_no_seq_scan(backlog: psycopg.Connection, backlog_dsn: str) -> None:
    backlog.execute("SELECT pg_stat_force_next_flush()")
    backlog.commit()
    seq_before, idx_before = _table_counters(backlog_dsn)
    for desc in (False, True):
        for queues in ("NULL", "ARRAY['default']"):
            backlog.execute(FITS % (-1 if desc else 10))
            row = backlog.execute(
                f"SELECT id, required FROM claim_tasks(1, 1, {queues}, 'plan-test', 60, {desc})"
            ).fetchone()
            assert row is not None and row[1] == 1
            backlog.rollback()
    backlog.execute("SELECT pg_stat_force_next_flush()")
    backlog.commit()
    seq_after, idx_after = _table_counters(backlog_dsn)
    assert seq_after == seq_before
    assert idx_after > idx_before


def test_a_session_that_began_on_an_empty_table_never_seq_scans(dsn: str) -> None:
    """Plans are made once per session. One made while the table was empty
    must not seq-scan the table once it holds a backlog (claim_tasks v5 runs
    with enable_seqscan off): v4 started every claimed batch with a scan of
    the whole table until an ANALYZE came by."""
    with psycopg.connect(dsn) as conn:
        conn.execute("SELECT set_config('search_path', 'taskqueue', false)")
        for available in ("NULL", "1000"):  # the bulk lock and the fit search
            assert conn.execute(f"SELECT count(*) FROM claim_tasks({available}, 50, NULL, 'w', 60, false)"
                                ).fetchone() == (0,)
        conn.commit()
        conn.execute(
            "INSERT INTO tasks (queue, payload, priority, required, state, max_attempts) "
            "SELECT 'default', '{}'::jsonb, g % 10, g % 20, 'queued', 3 FROM generate_series(1, 20000) g"
        )
        conn.commit()  # no ANALYZE: the cached plans stay as they were made
        for available in ("NULL", "1000"):
            got = conn.execute(f"SELECT count(*) FROM claim_tasks({available}, 50, NULL, 'w', 60, false)").fetchone()
            scans = conn.execute(
                "SELECT seq_scan FROM pg_stat_xact_user_tables WHERE schemaname = 'taskqueue' AND relname = 'tasks'"
            ).fetchone()
            conn.rollback()
            assert got == (50,)
            assert scans == (0,), f"available={available}: the claim seq-scanned tasks"


@pytest.mark.parametrize("available,limit", [(100, 1), (100, 20), (None, 1), (None, 20)])
def test_a_claim_over_every_queue_reads_one_head(dsn: str, available: int | None, limit: int) -> None:
    """With no queue list, the head of claim order is read over every queue at
    once (ix_tasks_claim_any, claim_tasks v8), so a dense head costs the same
    whatever the number of queues. v7 first listed every queue (a probe each)
    and read a window from each: 2,000 queues made a claim 0.01x the naive query."""
    with psycopg.connect(dsn) as conn:
        conn.execute("SELECT set_config('search_path', 'taskqueue', false)")
        conn.execute(
            "INSERT INTO tasks (queue, payload, priority, required, state, max_attempts) "
            "SELECT 'q' || (g % 2000), '{}'::jsonb, (g * 31) % 10, 1 + g % 4, 'queued', 3 "
            "FROM generate_series(1, 10000) g"
        )
        conn.commit()
        with psycopg.connect(dsn, autocommit=True) as vac:
            vac.execute("VACUUM ANALYZE taskqueue.tasks")
        expected = [r[0] for r in conn.execute(
            "SELECT id FROM tasks WHERE state = 'queued' ORDER BY priority, id LIMIT %s", (limit,)).fetchall()]
        sql = "SELECT * FROM claim_tasks(%s, %s, NULL, 'w', 60, false)" % (
            "NULL" if available is None else available, limit)
        explain(conn, sql)  # warm the plan cache (twice: the first call after ANALYZE plans again)
        explain(conn, sql)
        buffers, plan = explain(conn, sql)
        got = [r[0] for r in conn.execute(sql.replace("*", "id")).fetchall()]
        conn.rollback()
    assert got == expected
    assert plan["Actual Rows"] == limit
    # A loose scan alone over 2,000 queues touches several thousand buffers.
    assert buffers < 40 + 15 * limit, f"{buffers} buffers for a claim of {limit} over 2,000 queues"


def test_the_claim_functions_never_jit_compile(backlog: psycopg.Connection) -> None:
    """Their probe statements count each generate_series at 1,000 rows, so
    the estimate of fit_candidate's descending probes crossed jit_above_cost:
    PostgreSQL compiled the statement on every call, 40 ms for 0.3 ms of work
    (deadlines_max fell from 718 to 20 claims/s). Both run with jit off."""
    rows = backlog.execute(
        "SELECT p.proname, p.proconfig FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace "
        "WHERE n.nspname = 'taskqueue' AND p.proname IN ('claim_tasks', 'fit_candidate') ORDER BY p.proname"
    ).fetchall()
    assert [name for name, _ in rows] == ["claim_tasks", "fit_candidate"]
    for name, config in rows:
        assert "jit=off" in (config or []), name


@pytest.mark.parametrize("limit", [1, 20])
def test_a_claim_over_many_queues_walks_before_it_asks_each_queue(dsn: str, limit: int) -> None:
    """Past a head of 300 tasks that do not fit, a claim with no queue list
    reads on along the shared claim order (claim_tasks v9) instead of asking
    the fit buckets of each of 2,000 queues, about 27 probes per queue: v8
    touched tens of thousands of buffers here (the bench shape queues_half
    ran at 0.07x the naive query)."""
    with psycopg.connect(dsn) as conn:
        conn.execute("SELECT set_config('search_path', 'taskqueue', false)")
        conn.execute(
            "INSERT INTO tasks (queue, payload, priority, required, state, max_attempts) "
            "SELECT 'q' || (g % 2000), '{}'::jsonb, CASE WHEN g <= 300 THEN 0 ELSE 1 + g % 9 END, "
            "CASE WHEN g <= 300 THEN 1000 ELSE 1 + (g * 19) % 1000 END, 'queued', 3 "
            "FROM generate_series(1, 10000) g"
        )
        conn.commit()
        with psycopg.connect(dsn, autocommit=True) as vac:
            vac.execute("VACUUM ANALYZE taskqueue.tasks")
        expected, left = [], 500
        for task_id, required in conn.execute("SELECT id, required FROM tasks ORDER BY priority, id"):
            if required <= left and len(expected) < limit:
                expected.append(task_id)
                left -= required
        sql = f"SELECT * FROM claim_tasks(500, {limit}, NULL, 'w', 60, false)"
        explain(conn, sql)
        explain(conn, sql)
        buffers, plan = explain(conn, sql)
        got = [r[0] for r in conn.execute(sql.replace("*", "id")).fetchall()]
        conn.rollback()
    assert got == expected
    assert len(got) == 1 if limit == 1 else len(got) > 1
    # One task: 300 rows walked and 8 queues listed (53 buffers; v8 99,095).
    # Each further task must fit in what is left of 500, so it may walk the
    # listed queues' share of rows first, 8 per class of what is left per
    # queue (7,490 buffers in all; v8: 115,150 for this claim).
    budget = 1000 if limit == 1 else 2500 * len(got)
    assert buffers < budget, f"{buffers} buffers for a claim of {len(got)} over 2,000 queues"


@pytest.mark.parametrize("queues", [None, ["default"]])
@pytest.mark.parametrize("sizes", ["1", "1 + g % 2"])
def test_a_claim_over_tasks_of_one_size_asks_each_bucket_by_its_own_index(
    dsn: str, queues: list[str] | None, sizes: str
) -> None:
    """Every task needs 1 (or 1 and 2) and 10 are available: the claim asks
    the exact buckets, most of them empty. Statistics say any bucket holds
    every row, so after migration 0011 the empty buckets' probes were planned
    as a walk of ix_tasks_claim_any (priority, id) with a filter, reading the
    whole table: 1,774 buffers and 18 ms a claim at 30,000 tasks. That index
    now serves only statements that state its "id > 0" (migration 0012)."""
    with psycopg.connect(dsn) as conn:
        conn.execute("SELECT set_config('search_path', 'taskqueue', false)")
        conn.execute(
            "INSERT INTO tasks (queue, payload, priority, required, state, max_attempts) "
            f"SELECT 'default', '{{}}'::jsonb, 0, {sizes}, 'queued', 3 FROM generate_series(1, 20000) g"
        )
        conn.commit()
        with psycopg.connect(dsn, autocommit=True) as vac:
            vac.execute("VACUUM ANALYZE taskqueue.tasks")
        sql = "SELECT * FROM claim_tasks(10, 1, %s, 'w', 60, false)" % (
            "NULL" if queues is None else "ARRAY['default']")
        explain(conn, sql)
        explain(conn, sql)
        buffers, plan = explain(conn, sql)
        got = conn.execute(sql.replace("*", "id")).fetchone()
        conn.rollback()
        first = conn.execute("SELECT min(id) FROM tasks").fetchone()
    assert got == first
    assert plan["Actual Rows"] == 1
    assert buffers < 200, f"{buffers} buffers for one claim over 20,000 tasks of one size"


@pytest.mark.parametrize("listed", [3, 20])
@pytest.mark.parametrize("available", [None, 100, 50])
def test_a_claim_over_a_list_of_queues_reads_the_shared_head(dsn: str, listed: int, available: int | None) -> None:
    """A consumer that lists several queues (seed 002's agents) reads the head
    of the order over every queue and keeps its own rows (claim_tasks v9).
    v8 merged a 64-row window of each listed queue: 141 buffers a claim for 3
    queues and 825 for 20 on this backlog, where the naive query read 5."""
    with psycopg.connect(dsn) as conn:
        conn.execute("SELECT set_config('search_path', 'taskqueue', false)")
        conn.execute(
            "INSERT INTO tasks (queue, payload, priority, required, state, max_attempts) "
            "SELECT 'q' || (g % 40), '{}'::jsonb, g % 10, 1 + g % 100, 'queued', 3 FROM generate_series(1, 20000) g"
        )
        conn.commit()
        with psycopg.connect(dsn, autocommit=True) as vac:
            vac.execute("VACUUM ANALYZE taskqueue.tasks")
        queues = [f"q{i}" for i in range(listed)]
        cap = 2**31 if available is None else available
        first = conn.execute(
            "SELECT id FROM tasks WHERE queue = ANY (%s) AND required <= %s ORDER BY priority, id LIMIT 1",
            (queues, cap)).fetchone()
        sql = "SELECT * FROM claim_tasks(%s, 1, ARRAY[%s], 'w', 60, false)" % (
            "NULL" if available is None else available, ", ".join(f"'{q}'" for q in queues))
        explain(conn, sql)
        explain(conn, sql)
        buffers, plan = explain(conn, sql)
        got = conn.execute(sql.replace("*", "id")).fetchone()
        conn.rollback()
    assert got == first
    assert plan["Actual Rows"] == 1
    assert buffers < 60, f"{buffers} buffers for one claim over a list of {listed} queues"


def _calls_in_transaction(conn: psycopg.Connection, sql: str) -> tuple[list[int], dict[str, int]]:
    """Run a claim and return (ids, calls of each PL/pgSQL function it made), then roll back."""
    try:
        conn.execute("SET LOCAL track_functions = 'pl'")
    except psycopg.errors.InsufficientPrivilege:
        conn.rollback()
        pytest.skip("counting function calls needs a role that may set track_functions")
    ids = [r[0] for r in conn.execute(sql).fetchall()]
    calls = _function_calls(conn)
    conn.rollback()
    return ids, calls


def _seed_pile(conn: psycopg.Connection, dsn: str, pile: int, rows: int, pool: str | None) -> int:
    """One queue, sizes 1..1M (half fit 500,000) behind a pile of ``pile`` tasks too big; the first fit's id."""
    conn.execute("SELECT set_config('search_path', 'taskqueue', false)")
    conn.execute(
        "INSERT INTO tasks (queue, payload, priority, required, pool, state, max_attempts) "
        "SELECT 'default', '{}'::jsonb, 0, CASE WHEN g <= %s THEN 500001 + g %% 1000 "
        "ELSE 1 + (g * 7919) %% 1000000 END, %s, 'queued', 3 FROM generate_series(1, %s) g",
        (pile, pool, rows),
    )
    conn.commit()
    with psycopg.connect(dsn, autocommit=True) as vac:
        vac.execute("VACUUM ANALYZE taskqueue.tasks")
    row = conn.execute("SELECT id FROM tasks WHERE required <= 500000 ORDER BY priority, id LIMIT 1").fetchone()
    conn.rollback()
    assert row is not None
    return int(row[0])


@pytest.mark.parametrize("queues", [None, ["default"]])
@pytest.mark.parametrize("pile", [200, 5000])
def test_a_single_claim_looks_past_a_pile_of_tasks_too_big_before_it_asks_the_buckets(
    dsn: str, queues: list[str] | None, pile: int
) -> None:
    """Sizes 1..1M, half fit: each claim takes the oldest task that fits, so
    the ones too big pile up in front. A pile shorter than the look's budget
    (32 rows per class below what is left + 1: 608 here) is read in one plain
    statement, as the naive query reads it, with no call to the buckets
    (claim_tasks v10); version 9 asked the buckets past 72 rows. A longer pile
    is left to the buckets, and the look runs again from the task they found."""
    with psycopg.connect(dsn) as conn:
        first = _seed_pile(conn, dsn, pile, 20000, None)
        sql = "SELECT * FROM claim_tasks(500000, 1, %s, 'w', 60, false)" % (
            "NULL" if queues is None else "ARRAY['default']")
        explain(conn, sql)
        buffers, plan = explain(conn, sql)
        ids, calls = _calls_in_transaction(conn, sql.replace("*", "id"))
    assert ids == [first]
    assert plan["Actual Rows"] == 1
    if pile < 608:
        assert "fit_candidate" not in calls, calls
        assert buffers < 60, f"{buffers} buffers to look past a pile of {pile}"
    else:
        assert calls.get("fit_candidate") == 1, calls
        assert buffers < 400, f"{buffers} buffers past a pile of {pile}"


def test_a_session_that_saw_a_dry_look_asks_the_buckets_at_once_and_looks_again_later(dsn: str) -> None:
    """After a look that ran dry over one queue, the session's next claims of
    no larger an amount skip the look (the setting taskqueue.dry_look counts
    them), every 16th looks again, and a look that finds a fit clears the hint.
    The hint skips a statement, never a row: each claim still takes the first
    task in claim order that fits, even one enqueued ahead of the pile."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("SELECT set_config('search_path', 'taskqueue', false)")
        conn.execute(
            "INSERT INTO tasks (queue, payload, priority, required, state, max_attempts) "
            "SELECT 'default', '{}'::jsonb, 1, CASE WHEN g <= 2000 THEN 600000 ELSE 1 + (g * 7919) % 1000000 END, "
            "'queued', 3 FROM generate_series(1, 6000) g"
        )
        conn.execute("VACUUM ANALYZE tasks")

        def hint() -> str:
            return str(conn.execute("SELECT current_setting('taskqueue.dry_look', true)").fetchone()[0] or "")

        def first_fit(available: int) -> int:
            row = conn.execute("SELECT id FROM tasks WHERE state = 'queued' AND required <= %s "
                               "ORDER BY priority, id LIMIT 1", (available,)).fetchone()
            assert row is not None
            return int(row[0])

        def claim(available: int) -> int:
            row = conn.execute("SELECT id FROM claim_tasks(%s, 1, NULL, 'w', 60, false)", (available,)).fetchone()
            assert row is not None
            return int(row[0])

        assert hint() == ""
        expected = first_fit(500000)
        assert claim(500000) == expected
        assert hint() == "500000:0:*"  # the look ran dry past 608 rows: learnt
        for n in range(1, 16):
            expected = first_fit(400000)
            assert claim(400000) == expected  # no larger an amount: skipped, still exact
            assert hint() == f"500000:{n}:*"
        conn.execute("INSERT INTO tasks (queue, payload, priority, required, state, max_attempts) "
                     "VALUES ('default', '{}', 0, 10, 'queued', 3)")
        ahead = first_fit(500000)
        assert claim(500000) == ahead  # the 16th looks again, finds the task ahead of the pile
        assert hint() == ""
        expected = first_fit(700000)
        assert claim(700000) == expected  # everything fits: no pile, no hint
        assert hint() == ""


def test_a_look_that_meets_a_pooled_fit_hands_on_from_just_before_it(dsn: str) -> None:
    """Every task in a pool, a pile of 500 tasks too big in front: the look
    meets the first fit and its pool. Version 11 handed the claim to the
    general path just before that task: 516 rows fetched by index here, the
    pile once and the look's fits; version 10 went back to where the look had
    started, read a 64-row window there and asked the buckets: 614 rows, and
    a search. Version 12 starts the task in the look, with its pool's slot."""
    pile = 500
    with psycopg.connect(dsn) as conn:
        conn.execute("INSERT INTO taskqueue.pools (name, running_limit) VALUES ('net', 1000)")
        first = _seed_pile(conn, dsn, pile, 5000, "net")
        for queues in ("NULL", "ARRAY['default']"):
            sql = f"SELECT id FROM claim_tasks(500000, 1, {queues}, 'w', 60, false)"
            conn.execute(sql)  # warm the plans
            conn.rollback()
            # The xact view also holds counts not yet flushed from earlier
            # transactions: count the claim's own as a difference.
            before = _index_fetches(conn)
            ids = [r[0] for r in conn.execute(sql).fetchall()]
            fetched = _index_fetches(conn) - before
            conn.rollback()
            assert ids == [first]
            assert pile <= fetched < pile + 64, (
                f"{fetched} rows fetched by index to claim past a pile of {pile} ({queues})")


def test_the_look_starts_a_pooled_task_with_its_slot_and_parks_the_fits_of_full_pools(dsn: str) -> None:
    """At the head: fits in a full pool, one task too big, then fits in a pool
    with room. The look starts the first fit in the pool with room and takes
    its slot in the same statement, with no call to take_task, take_pool_slot
    or the buckets (claim_tasks v12; version 11 sent every pooled fit to the
    general path), and parks the full pool's fits it passed over. The pool
    counts stay exact, and once the pool with room has filled, its next fit
    starts nothing: the claim goes on to a task with no pool."""
    with psycopg.connect(dsn) as conn:
        conn.execute("SELECT set_config('search_path', 'taskqueue', false)")
        conn.execute("INSERT INTO pools (name, running_limit) VALUES ('full', 0), ('open', 2)")
        ids = [r[0] for r in conn.execute(
            "INSERT INTO tasks (queue, payload, priority, required, pool, state, max_attempts) "
            "SELECT 'default', '{}'::jsonb, 0, CASE WHEN g = 4 THEN 900 ELSE 10 END, "
            "CASE WHEN g <= 3 THEN 'full' WHEN g <= 7 THEN 'open' END, 'queued', 3 "
            "FROM generate_series(1, 9) g ORDER BY g RETURNING id").fetchall()]
        conn.commit()
        claim = "SELECT id, pool FROM claim_tasks(100, 1, NULL, 'w', 60, false)"
        conn.execute(claim)  # warm the plans
        conn.rollback()
        got, calls = _calls_in_transaction(conn, claim.replace("id, pool", "id"))
        assert got == [ids[4]]
        assert calls.keys() <= {"claim_tasks", "park_rows"}, calls
        for expected in (ids[4], ids[5]):
            assert conn.execute(claim).fetchall() == [(expected, "open")]
            conn.commit()
        parked = [r[0] for r in conn.execute("SELECT id FROM tasks WHERE parked ORDER BY id")]
        assert parked == ids[:3]
        assert conn.execute("SELECT running FROM pools WHERE name = 'open'").fetchone()[0] == 2
        # 'open' is full now (2 of 2): its next fit starts nothing, the task with no pool is next.
        assert conn.execute(claim).fetchall() == [(ids[7], None)]
        conn.commit()
        assert conn.execute("SELECT running FROM pools WHERE name = 'open'").fetchone()[0] == 2
        states = dict(conn.execute("SELECT id, state FROM tasks").fetchall())
        assert [states[i] for i in ids] == ["queued"] * 4 + ["running"] * 2 + ["queued", "running", "queued"]


def _index_fetches(conn: psycopg.Connection) -> int:
    row = conn.execute("SELECT idx_tup_fetch FROM pg_stat_xact_user_tables "
                       "WHERE schemaname = 'taskqueue' AND relname = 'tasks'").fetchone()
    return int(row[0]) if row else 0


@pytest.mark.parametrize("value", ["garbage", "x:y:default", "99999999999999999999:1:*", "500000:1:", ":::"])
def test_a_dry_look_hint_set_by_hand_is_cleared_and_the_claim_stays_exact(dsn: str, value: str) -> None:
    """taskqueue.dry_look is the claim's own session setting; a value that
    does not read 'amount:skips:queue' is cleared, never parsed, so a typo in
    a session's settings cannot make a claim fail (claim_tasks v11)."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("SELECT set_config('search_path', 'taskqueue', false)")
        conn.execute(
            "INSERT INTO tasks (queue, payload, priority, required, state, max_attempts) "
            "SELECT 'default', '{}'::jsonb, 1, 1 + (g * 7919) % 1000, 'queued', 3 FROM generate_series(1, 300) g")
        conn.execute("SELECT set_config('taskqueue.dry_look', %s, false)", (value,))
        expected = conn.execute("SELECT id FROM tasks WHERE state = 'queued' AND required <= 500 "
                                "ORDER BY priority, id LIMIT 1").fetchone()
        got = conn.execute("SELECT id FROM claim_tasks(500, 1, ARRAY['default'], 'w', 60, false)").fetchone()
        hint = conn.execute("SELECT current_setting('taskqueue.dry_look', true)").fetchone()
    assert expected is not None and got == expected
    assert hint is not None and hint[0] == ""


def test_a_claim_over_every_queue_walks_a_pile_in_plain_statements_and_remembers_how_many_queues(dsn: str) -> None:
    """50 queues, a pile of 3,000 tasks too big at the head of the shared
    order: a claim given no queue list walks it as step W would, in plain
    statements (claim_tasks v11), listing queues only as the walk outgrows
    those listed (8 rows a queue for each class below 51: 1,536 rows for the
    32 it lists, so no bucket is asked), and keeps the count
    (taskqueue.queue_count). The session's
    next claim walks that far before it lists any: no claimable_queues call.
    A count gone stale, or one that is not a number, changes the cost, never
    the task claimed."""
    with psycopg.connect(dsn) as conn:
        conn.execute("SELECT set_config('search_path', 'taskqueue', false)")
        conn.execute(
            "INSERT INTO tasks (queue, payload, priority, required, state, max_attempts) "
            "SELECT 'q' || g % 50, '{}'::jsonb, 0, CASE WHEN g <= 1500 THEN 600 ELSE 1 + (g * 7919) % 100 END, "
            "'queued', 3 FROM generate_series(1, 8000) g")
        conn.commit()
        with psycopg.connect(dsn, autocommit=True) as vac:
            vac.execute("VACUUM ANALYZE taskqueue.tasks")

        def first_fit() -> int:
            row = conn.execute("SELECT id FROM tasks WHERE state = 'queued' AND required <= 50 "
                               "ORDER BY priority, id LIMIT 1").fetchone()
            assert row is not None
            return int(row[0])

        def count() -> str:
            row = conn.execute("SELECT current_setting('taskqueue.queue_count', true)").fetchone()
            return str(row[0] if row and row[0] is not None else "")

        sql = "SELECT id FROM claim_tasks(50, 1, NULL, 'w', 60, false)"

        def claim() -> tuple[list[int], dict[str, int]]:
            """One claim, committed (a setting made in a transaction that rolls back is undone)."""
            try:
                conn.execute("SET LOCAL track_functions = 'pl'")
            except psycopg.errors.InsufficientPrivilege:
                conn.rollback()
                pytest.skip("counting function calls needs a role that may set track_functions")
            before = _function_calls(conn)
            ids = [r[0] for r in conn.execute(sql).fetchall()]
            after = _function_calls(conn)
            conn.commit()
            return ids, {k: v - before.get(k, 0) for k, v in after.items() if v > before.get(k, 0)}

        expected = first_fit()
        ids, calls = claim()
        assert ids == [expected]
        assert calls.get("claimable_queues", 0) >= 1 and "fit_candidate" not in calls, calls
        assert count() == "32"  # 8 listed, then 32: their share (1,536 rows) reaches past the pile
        expected = first_fit()
        ids, calls = claim()
        assert ids == [expected]
        assert "claimable_queues" not in calls and "fit_candidate" not in calls, calls
        assert count() == "32"
        for stale in ("100000", "2", "0", "many", "-5"):
            conn.execute("SELECT set_config('taskqueue.queue_count', %s, false)", (stale,))
            conn.commit()
            expected = first_fit()
            ids, _ = claim()
            assert ids == [expected], stale
        # A pile with nothing that fits after it: every queue's share is
        # walked, then the buckets answer, and the claim comes back empty.
        conn.execute("UPDATE tasks SET required = 600 WHERE required <= 50")
        conn.commit()
        for hint in ("50", "100000", ""):
            conn.execute("SELECT set_config('taskqueue.queue_count', %s, false)", (hint,))
            conn.commit()
            ids, _ = claim()
            assert ids == [], hint


def _function_calls(conn: psycopg.Connection) -> dict[str, int]:
    """Calls of each of the queue's PL/pgSQL functions, as this backend counts them so far."""
    return {str(k): int(v) for k, v in conn.execute(
        "SELECT funcname, calls FROM pg_stat_xact_user_functions WHERE schemaname = 'taskqueue'").fetchall()}
