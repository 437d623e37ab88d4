"""Over four queues or more, few fits are read whole (few_fits v1, fit_candidate v13, claim_tasks v37; migration 0052;
over every queue in one range, few_fits v2 and fit_candidate v14, migration 0053).

Each level of the resource fit is a probe per queue, so over 100 queues a
claim paid thousands of index descents whatever the number of fits. few_fits
reads every queue's fitting rows, index only, within a budget; read to the
end, its first ids after the key are the plain rule's. A claim over several
queues whose look ran dry asks it once, and while its hint says the fits
are few, the next claims ask it first (step F). The answers must stay the
plain rule's whichever way they are found.
"""

from __future__ import annotations

import random

import psycopg
import pytest

FEW = "SELECT few_fits(%s, %s, %s, %s, %s, %s, %s, %s)"
QUEUES = [f"q{i}" for i in range(6)]


def _seed(conn: psycopg.Connection, rng: random.Random, n: int, fit_share: float, available: int,
          pools: bool) -> dict[int, tuple[str, int, int, str | None]]:
    """n queued tasks over QUEUES; the fits spread over the order, the rest just too big. id -> (queue, p, r, pool)."""
    conn.execute("SELECT set_config('search_path', 'taskqueue', false)")
    spec = []
    for _ in range(n):
        fits = rng.random() < fit_share
        spec.append((rng.choice(QUEUES), rng.randint(-500, 500),
                     rng.randint(available // 2, available) if fits else rng.randint(available + 1, available * 3),
                     rng.choice((None, None, "p0", "p1")) if pools else None))
    rows = {}
    with conn.cursor() as cur:
        for queue, priority, required, pool in spec:
            cur.execute("INSERT INTO tasks (queue, payload, priority, required, pool, state, max_attempts) "
                        "VALUES (%s, '{}', %s, %s, %s, 'queued', 3) RETURNING id", (queue, priority, required, pool))
            row = cur.fetchone()
            assert row is not None
            rows[row[0]] = (queue, priority, required, pool)
    if pools:
        conn.execute("INSERT INTO pools (name, running_limit) VALUES ('p0', 0), ('p1', NULL) "
                     "ON CONFLICT (name) DO UPDATE SET running_limit = excluded.running_limit")
    conn.execute("ANALYZE tasks")
    conn.commit()
    return rows


def _key(priority: int, task_id: int, descending: bool) -> tuple[int, int]:
    return (-priority if descending else priority, task_id)


def _plain(rows: dict[int, tuple[str, int, int, str | None]], queues: list[str] | None, available: int,
           descending: bool, after: tuple[int, int] = (-2147483648, 0), full: tuple[str, ...] = ()) -> list[int]:
    """Every fit of the queues after the key in claim order, pools in full left out."""
    fits = [(_key(p, i, descending), i) for i, (q, p, r, pool) in rows.items()
            if (queues is None or q in queues) and r <= available and pool not in full
            and _key(p, i, descending) > after]
    return [i for _, i in sorted(fits)]


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("descending", [False, True])
def test_few_fits_are_the_plain_rules_first_fits(dsn: str, seed: int, descending: bool) -> None:
    rng = random.Random(5200 + seed)
    available = 1_000_000
    with psycopg.connect(dsn) as conn:
        rows = _seed(conn, rng, 1500, 0.05, available, pools=True)
        order = sorted(_key(p, i, descending) for i, (_, p, _, _) in rows.items())
        keys = [(-2147483648, 0)] + [order[rng.randrange(len(order))] for _ in range(8)]
        for queues in (None, ["q1", "q3", "q4", "q5"]):
            for key in keys:
                for full in ((), ("p0",)):
                    amount = rng.choice((available, rng.randint(available // 2, available)))
                    conn.execute("SELECT set_config('taskqueue.fit_scan', '', false)")
                    # Over every queue the caller gives the budget (fit_candidate: 128 rows a queue).
                    got = conn.execute(FEW, (queues, amount, key[0], key[1], descending, list(full), 8,
                                             None if queues else 10_000)).fetchone()[0]
                    assert got == _plain(rows, queues, amount, descending, key, full)[:8], (queues, key, full)


def test_past_its_budget_it_says_so_and_skips_the_read_for_a_while(dsn: str) -> None:
    rng = random.Random(5300)
    with psycopg.connect(dsn) as conn:
        rows = _seed(conn, rng, 600, 0.1, 1000, pools=False)
        fits = len(_plain(rows, None, 1000, False))
        start = (-2147483648, 0, False, [], 1)
        conn.execute("SELECT set_config('taskqueue.fit_scan', '', false)")
        assert conn.execute(FEW, (None, 1000, *start, fits)).fetchone()[0] == _plain(rows, None, 1000, False)[:1]
        assert conn.execute("SELECT current_setting('taskqueue.fit_scan')").fetchone()[0] == "few:1000"
        # One row short of every fit: past the budget.
        assert conn.execute(FEW, (None, 1000, *start, fits - 1)).fetchone()[0] is None
        assert conn.execute("SELECT current_setting('taskqueue.fit_scan')").fetchone()[0] == "over:1000:0"
        # The next 31 calls of at least that amount skip the read, even with room; one of less reads.
        for n in range(1, 32):
            assert conn.execute(FEW, (None, 1000, *start, fits)).fetchone()[0] is None
            assert conn.execute("SELECT current_setting('taskqueue.fit_scan')").fetchone()[0] == f"over:1000:{n}"
        assert conn.execute(FEW, (None, 999, *start, 10 * fits)).fetchone()[0] is not None
        assert conn.execute(FEW, (None, 1000, *start, fits)).fetchone()[0] == _plain(rows, None, 1000, False)[:1]


def test_over_fewer_than_four_queues_it_reads_nothing(dsn: str) -> None:
    """Three queues' levels cost a few dozen probes: the caller asks them, and the hint stays as it was."""
    rng = random.Random(5500)
    with psycopg.connect(dsn) as conn:
        _seed(conn, rng, 300, 0.1, 1000, pools=False)
        conn.execute("SELECT set_config('taskqueue.fit_scan', 'few:7', false)")
        assert conn.execute(FEW, (["q0", "q1", "q2"], 1000, -2147483648, 0, False, [], 1, None)).fetchone()[0] is None
        assert conn.execute("SELECT current_setting('taskqueue.fit_scan')").fetchone()[0] == "few:7"
        assert conn.execute(FEW, (["q0", "q1", "q2", "q3"], 1000, -2147483648, 0, False, [], 1,
                                  None)).fetchone()[0] is not None
        assert conn.execute("SELECT current_setting('taskqueue.fit_scan')").fetchone()[0] == "few:1000"


@pytest.mark.parametrize("descending", [False, True])
@pytest.mark.parametrize("queues", [None, ["q0", "q2", "q4", "q5"]])
def test_claims_over_several_queues_take_the_plain_rules_task(dsn: str, descending: bool,
                                                             queues: list[str] | None) -> None:
    """A pile too big at the head, 1% fitting: the look runs dry, few_fits learns, step F answers."""
    rng = random.Random(5400)
    available = 5000
    with psycopg.connect(dsn, autocommit=True) as conn:
        rows = _seed(conn, rng, 4000, 0.01, available, pools=True)
        conn.execute("SELECT set_config('taskqueue.fit_scan', '', false)")
        hints = set()
        while True:
            # p0 is full: its fits are never the answer (the claim parks them).
            want = _plain(rows, queues, available, descending, full=("p0",))
            got = conn.execute("SELECT id FROM claim_tasks(%s, 1, %s, 'w', 60, %s)",
                               (available, queues, descending)).fetchone()
            assert (got[0] if got else None) == (want[0] if want else None)
            hints.add(conn.execute("SELECT current_setting('taskqueue.fit_scan', true)").fetchone()[0])
            if got is None:
                break
            conn.execute("UPDATE tasks SET state = 'done', finished_at = now(), lease_token = NULL, "
                         "lease_expires_at = NULL WHERE id = %s", (got[0],))
            conn.execute("UPDATE pools SET running = running - 1 WHERE name = %s", (rows[got[0]][3],))
            del rows[got[0]]
        assert f"few:{available}" in hints, hints
        left = conn.execute("SELECT count(*) FROM tasks WHERE state = 'queued' AND required <= %s "
                            "AND (%s::text[] IS NULL OR queue = ANY (%s)) AND pool IS DISTINCT FROM 'p0'",
                            (available, queues, queues)).fetchone()[0]
        assert left == 0


def test_over_every_queue_with_no_budget_known_it_reads_nothing_then_keeps_the_last(dsn: str) -> None:
    """Step F passes no budget: the session's last one given (fit_candidate's) bounds the read."""
    rng = random.Random(5600)
    with psycopg.connect(dsn) as conn:
        rows = _seed(conn, rng, 400, 0.1, 1000, pools=False)
        fits = _plain(rows, None, 1000, False)
        start = (-2147483648, 0, False, [], 1)
        conn.execute("SELECT set_config('taskqueue.fit_scan', 'few:7', false)")
        conn.execute("SELECT set_config('taskqueue.fit_budget', '', false)")
        assert conn.execute(FEW, (None, 1000, *start, None)).fetchone()[0] is None
        assert conn.execute("SELECT current_setting('taskqueue.fit_scan')").fetchone()[0] == "few:7"
        assert conn.execute(FEW, (None, 1000, *start, len(fits))).fetchone()[0] == fits[:1]
        assert conn.execute("SELECT current_setting('taskqueue.fit_budget')").fetchone()[0] == str(len(fits))
        assert conn.execute(FEW, (None, 1000, *start, None)).fetchone()[0] == fits[:1]
        # The kept budget is one row short once a fit more is enqueued: past it.
        conn.execute("INSERT INTO tasks (queue, payload, priority, required, state, max_attempts) "
                     "VALUES ('q0', '{}', 0, 1, 'queued', 3)")
        assert conn.execute(FEW, (None, 1000, *start, None)).fetchone()[0] is None
        assert conn.execute("SELECT current_setting('taskqueue.fit_scan')").fetchone()[0] == "over:1000:0"


def test_over_every_queue_it_reads_one_range_of_the_index_without_the_queue(dsn: str) -> None:
    """One scan of ix_tasks_fit_any_exact, none of ix_tasks_fit_exact (version 1 scanned it once a queue)."""
    rng = random.Random(5700)
    with psycopg.connect(dsn) as conn:
        rows = _seed(conn, rng, 600, 0.05, 1000, pools=True)
        scans = ("SELECT pg_stat_get_xact_numscans('ix_tasks_fit_any_exact'::regclass), "
                 "pg_stat_get_xact_numscans('ix_tasks_fit_exact'::regclass)")
        for full in ([], ["p0"]):
            before = conn.execute(scans).fetchone()
            got = conn.execute(FEW, (None, 1000, -2147483648, 0, True, full, 3, 10_000)).fetchone()[0]
            after = conn.execute(scans).fetchone()
            assert got == _plain(rows, None, 1000, True, full=tuple(full))[:3]
            assert (after[0] - before[0], after[1] - before[1]) == (1, 0), full
            conn.rollback()


@pytest.mark.parametrize("descending", [False, True])
def test_claims_over_more_than_128_queues_read_the_fits_whole(dsn: str, descending: bool) -> None:
    """Over 130 queues, 0.25% fitting at the far end of the order: the walk runs dry, fit_candidate's read
    finds the fits few, and step F (which version 1 refused over more than 128 queues) takes the rest,
    each the plain rule's task."""
    available = 20
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("SELECT set_config('search_path', 'taskqueue', false)")
        conn.execute(
            "INSERT INTO tasks (queue, payload, priority, required, state, max_attempts) "
            "SELECT 'q' || (g * 7919 %% 130), '{}', "
            "       CASE WHEN g %% 400 = 0 THEN CASE WHEN %s THEN -1 - g %% 97 ELSE 1000 + g %% 97 END ELSE g %% 1000 END, "
            "       CASE WHEN g %% 400 = 0 THEN 1 + g %% %s ELSE %s + 1 + g %% 3 END, 'queued', 3 "
            "  FROM generate_series(1, 40000) g", (descending, available, available))
        conn.execute("ANALYZE tasks")
        rows = {i: ("", p, r, None) for i, p, r in conn.execute("SELECT id, priority, required FROM tasks")}
        conn.execute("SELECT set_config('taskqueue.fit_scan', '', false)")
        hints = []
        scans = "SELECT pg_stat_get_xact_numscans('ix_tasks_fit_any_exact'::regclass)"
        while True:
            want = _plain(rows, None, available, descending)
            with conn.transaction():
                before = conn.execute(scans).fetchone()[0]
                got = conn.execute("SELECT id FROM claim_tasks(%s, 1, NULL, 'w', 60, %s)",
                                   (available, descending)).fetchone()
                any_scans = conn.execute(scans).fetchone()[0] - before
            assert (got[0] if got else None) == (want[0] if want else None)
            hints.append((conn.execute("SELECT current_setting('taskqueue.fit_scan', true)").fetchone()[0], any_scans))
            if got is None:
                break
            conn.execute("UPDATE tasks SET state = 'done', finished_at = now(), lease_token = NULL, "
                         "lease_expires_at = NULL WHERE id = %s", (got[0],))
            del rows[got[0]]
        assert len(hints) == 101
        # After the first claims, every one is step F's: the hint holds and the one range is read.
        assert all(h == (f"few:{available}", 1) for h in hints[2:-1]), hints


@pytest.mark.parametrize("descending", [False, True])
def test_fit_candidate_over_every_queue_reads_one_range(dsn: str, descending: bool) -> None:
    """fit_candidate v14 with no queue list: its first fit after the key is the plain rule's, read in one range."""
    rng = random.Random(5900)
    available = 1_000_000
    with psycopg.connect(dsn) as conn:
        rows = _seed(conn, rng, 1200, 0.05, available, pools=True)
        order = sorted(_key(p, i, descending) for i, (_, p, _, _) in rows.items())
        scans = "SELECT pg_stat_get_xact_numscans('ix_tasks_fit_any_exact'::regclass)"
        # fit_candidate negates a descending key's priority into an integer: start at -(2^31 - 1).
        for key in [(-2147483647, 0)] + [order[rng.randrange(len(order))] for _ in range(6)]:
            for full in ([], ["p0"]):
                conn.execute("SELECT set_config('taskqueue.fit_scan', '', false)")
                before = conn.execute(scans).fetchone()[0]
                got = conn.execute("SELECT id FROM fit_candidate(NULL, %s, %s, %s, %s, %s)",
                                   (available, key[0], key[1], descending, full)).fetchone()[0]
                want = _plain(rows, None, available, descending, key, tuple(full))
                assert got == (want[0] if want else None), (key, full)
                assert conn.execute(scans).fetchone()[0] - before == 1
                conn.rollback()
