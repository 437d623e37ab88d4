"""One task in descending order over one queue remembers a dry look (claim_tasks v14, v34).

Over a pile of tasks too big at the head, every claim paid its first read
(a window before version 34, the look since) before the buckets. One that
read all it may and found no row that fits sets the session's hint, as the
ascending look does, and the next 15 claims of no larger an amount ask the
buckets at once.
"""

from __future__ import annotations

import psycopg
import pytest

pytestmark = pytest.mark.slow

KEY = "desc:default"


def _seed(conn: psycopg.Connection, pile: int) -> None:
    conn.execute(
        "INSERT INTO tasks (queue, payload, priority, required, state, max_attempts) "
        "SELECT 'default', '{}'::jsonb, 5, CASE WHEN g <= %s THEN 600000 + g ELSE 1 + (g * 7919) %% 1000000 END, "
        "'queued', 3 FROM generate_series(1, 4000) g", (pile,))
    conn.execute("VACUUM ANALYZE tasks")


def _hint(conn: psycopg.Connection) -> str:
    return str(conn.execute("SELECT current_setting('taskqueue.dry_look', true)").fetchone()[0] or "")


def _first_fit(conn: psycopg.Connection, available: int) -> int:
    row = conn.execute("SELECT id FROM tasks WHERE state = 'queued' AND required <= %s "
                       "ORDER BY priority DESC, id LIMIT 1", (available,)).fetchone()
    assert row is not None
    return int(row[0])


def _claim(conn: psycopg.Connection, available: int | None) -> int:
    row = conn.execute("SELECT id FROM claim_tasks(%s, 1, NULL, 'w', 60, true)", (available,)).fetchone()
    assert row is not None
    return int(row[0])


def test_a_session_that_saw_a_dry_descending_look_asks_the_buckets_at_once(dsn: str) -> None:
    """The first claim's look reads its budget (32 rows a class: 608 for
    500,000) and every row is too big: learnt. The next 15 claims of no
    larger an amount skip the look, each still the naive query's task (one
    enqueued at a better priority too); the 16th looks again; a claim whose
    look meets a fit clears the hint."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("SELECT set_config('search_path', 'taskqueue', false)")
        _seed(conn, 1000)
        assert _hint(conn) == ""
        expected = _first_fit(conn, 500000)
        assert _claim(conn, 500000) == expected
        assert _hint(conn) == f"500000:0:{KEY}"
        for n in range(1, 16):
            if n == 7:
                conn.execute("INSERT INTO tasks (queue, payload, priority, required, state, max_attempts) "
                             "VALUES ('default', '{}', 9, 10, 'queued', 3)")
            expected = _first_fit(conn, 400000)
            assert _claim(conn, 400000) == expected
            assert _hint(conn) == f"500000:{n}:{KEY}"
        expected = _first_fit(conn, 500000)
        assert _claim(conn, 500000) == expected  # the 16th looks: still a pile, learnt again
        assert _hint(conn) == f"500000:0:{KEY}"
        expected = _first_fit(conn, 700000)
        assert _claim(conn, 700000) == expected  # the pile fits now: the look takes its first row
        assert _hint(conn) == ""
        # Ascending claims keep their own key: a descending hint is not theirs.
        conn.execute("SELECT set_config('taskqueue.dry_look', %s, false)", (f"500000:3:{KEY}",))
        row = conn.execute("SELECT id FROM tasks WHERE state = 'queued' AND required <= 500000 "
                           "ORDER BY priority, id LIMIT 1").fetchone()
        assert conn.execute("SELECT id FROM claim_tasks(500000, 1, NULL, 'w', 60, false)").fetchone() == row


def test_fits_locked_by_others_are_not_a_pile(dsn: str) -> None:
    """The first 64 rows fit but another transaction holds them: the look
    takes none, and the claim goes on to the 65th, but no hint is learnt."""
    with psycopg.connect(dsn, autocommit=True) as conn, psycopg.connect(dsn) as other:
        conn.execute("SELECT set_config('search_path', 'taskqueue', false)")
        _seed(conn, 0)
        held = [r[0] for r in other.execute(
            "SELECT id FROM taskqueue.tasks WHERE state = 'queued' ORDER BY priority DESC, id LIMIT 64 FOR UPDATE").fetchall()]
        expected = conn.execute("SELECT id FROM tasks WHERE state = 'queued' AND NOT (id = ANY (%s)) "
                                "ORDER BY priority DESC, id LIMIT 1", (held,)).fetchone()
        assert conn.execute("SELECT id FROM claim_tasks(2000000, 1, NULL, 'w', 60, true)").fetchone() == expected
        assert _hint(conn) == ""
        other.rollback()


def test_descending_claims_under_the_hint_stay_exact(dsn: str) -> None:
    """300 claims of varied amounts over ten priorities with a pile of 1,000
    tasks too big at the head of each (longer than any look's budget): every
    one the naive query's task."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("SELECT set_config('search_path', 'taskqueue', false)")
        conn.execute(
            "INSERT INTO tasks (queue, payload, priority, required, state, max_attempts) "
            "SELECT 'default', '{}'::jsonb, g % 10, CASE WHEN g <= 10000 THEN 900000 + g ELSE 1 + (g * 7919) % 1000000 END, "
            "'queued', 3 FROM generate_series(1, 16000) g")
        conn.execute("VACUUM ANALYZE tasks")
        learnt = 0
        for n in range(300):
            available = 16 + (n * 104729) % 899000
            if n % 60 == 30:
                conn.execute("INSERT INTO tasks (queue, payload, priority, required, state, max_attempts) "
                             "VALUES ('default', '{}', %s, 17, 'queued', 3)", (n % 10,))
            expected = conn.execute("SELECT id FROM tasks WHERE state = 'queued' AND required <= %s "
                                    "ORDER BY priority DESC, id LIMIT 1", (available,)).fetchone()
            got = conn.execute("SELECT id FROM claim_tasks(%s, 1, NULL, 'w', 60, true)", (available,)).fetchone()
            assert got == expected, (n, available)
            learnt += _hint(conn).endswith(KEY)
        assert learnt > 50, f"the hint held after only {learnt} of 300 claims"
