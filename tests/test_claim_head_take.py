"""A claim of one task first takes from the head of the claim order (claim_tasks v46).

Over every queue, or one queue ascending, one statement of the naive query's
shape reads the next 32 rows of the claim order and starts the first that
fits, is not in a full pool and could be locked. Its answer must be the
naive query's, rows locked elsewhere and pools included; a miss hands on to
the general path and backs off (the setting ``taskqueue.head_take``).
"""

from __future__ import annotations

import random

import psycopg
import pytest

SETTING = "SELECT current_setting('taskqueue.head_take', true)"


def _connect(dsn: str, autocommit: bool = True) -> psycopg.Connection:
    conn = psycopg.connect(dsn, autocommit=autocommit)
    conn.execute("SELECT set_config('search_path', 'taskqueue', false)")
    if not autocommit:
        conn.commit()
    return conn


def _insert(conn: psycopg.Connection, rows: list[tuple[str, int, int, str | None]]) -> None:
    with conn.cursor() as cur:
        cur.executemany("INSERT INTO tasks (queue, payload, priority, required, pool, state, max_attempts) "
                        "VALUES (%s, '{}', %s, %s, %s, 'queued', 3)", rows)


def _naive(conn: psycopg.Connection, available: int, queue: str | None, desc: bool, held: list[int]) -> int | None:
    """The smallest claim key among queued rows that fit, whose pool has room, not held elsewhere."""
    row = conn.execute(
        "SELECT t.id FROM tasks t LEFT JOIN pools p ON p.name = t.pool"
        " WHERE t.state = 'queued' AND NOT t.parked AND t.required <= %s AND (%s::text IS NULL OR t.queue = %s)"
        "   AND NOT (t.id = ANY (%s))"
        "   AND (p.name IS NULL OR p.running_limit IS NULL OR p.running < p.running_limit)"
        f" ORDER BY t.priority {'DESC' if desc else ''}, t.id LIMIT 1",
        (available, queue, queue, held)).fetchone()
    return None if row is None else int(row[0])


def _claim(conn: psycopg.Connection, available: int, queues: list[str] | None, desc: bool) -> int | None:
    row = conn.execute("SELECT id FROM claim_tasks(%s, 1, %s, 'w', 60, %s)", (available, queues, desc)).fetchone()
    return None if row is None else int(row[0])


@pytest.mark.parametrize(("queues", "desc"), [(None, False), (None, True), (["a"], False)],
                         ids=["every_queue", "every_queue_desc", "one_queue"])
def test_the_head_take_is_the_naive_answer_with_rows_held_elsewhere_and_pools(
        dsn: str, queues: list[str] | None, desc: bool) -> None:
    """Dense fits at the head, some rows locked by another transaction, some
    in a full pool, some in a pool with room: 60 claims in a row each take
    what the naive query would, and the pool with room counts its slots."""
    rng = random.Random(7)
    with _connect(dsn) as conn, _connect(dsn, autocommit=False) as other:
        conn.execute("INSERT INTO pools (name, running_limit) VALUES ('full', 0), ('room', 1000)")
        _insert(conn, [(rng.choice("ab"), rng.randint(0, 5), rng.randint(1, 10),
                        rng.choice([None, None, None, "full", "room"])) for _ in range(600)])
        held = [int(r[0]) for r in other.execute(
            "SELECT id FROM tasks WHERE id % 7 = 0 ORDER BY id FOR UPDATE").fetchall()]
        queue = queues[0] if queues else None
        for _ in range(60):
            available = rng.randint(1, 10)
            expected = _naive(conn, available, queue, desc, held)
            assert expected is not None
            assert _claim(conn, available, queues, desc) == expected
        taken = conn.execute("SELECT count(*) FROM tasks WHERE state = 'running' AND pool = 'room'").fetchone()
        running = conn.execute("SELECT running FROM pools WHERE name = 'room'").fetchone()
        assert running == taken
        assert conn.execute("SELECT count(*) FROM tasks WHERE state = 'running' AND pool = 'full'").fetchone() == (0,)
        other.rollback()


def test_a_pooled_fit_at_the_head_is_started_with_its_slot_and_a_full_pools_row_is_passed(dsn: str) -> None:
    """The head's first fit is in a full pool (passed, not started), the next
    in a pool with room: the head take's second statement starts it and takes
    its slot, and the session goes to that statement first from then on ('p')."""
    with _connect(dsn) as conn:
        conn.execute("INSERT INTO pools (name, running_limit) VALUES ('full', 0), ('room', 2)")
        _insert(conn, [("a", 0, 1, "full"), ("a", 0, 1, "room"), ("a", 0, 1, None), ("a", 1, 1, "room")])
        ids = [int(r[0]) for r in conn.execute("SELECT id FROM tasks ORDER BY id").fetchall()]
        assert _claim(conn, 5, None, False) == ids[1]
        assert conn.execute(SETTING).fetchone()[0] == "p"
        assert _claim(conn, 5, None, False) == ids[2]
        assert _claim(conn, 5, None, False) == ids[3]
        assert conn.execute("SELECT running FROM pools WHERE name = 'room'").fetchone() == (2,)
        assert conn.execute(SETTING).fetchone()[0] == "p"
        assert conn.execute("SELECT state FROM tasks WHERE id = %s", (ids[0],)).fetchone() == ("queued",)


def test_a_miss_hands_on_to_the_general_path_and_backs_off(dsn: str) -> None:
    """40 tasks too big at the head: the head take reads its 32 rows, finds
    nothing, and the general path answers. The session skips the head take
    for its next 15 claims, 31 after the next miss, at most 255; a head take
    that starts a task clears the count."""
    with _connect(dsn) as conn:
        _insert(conn, [("a", 0, 100, None)] * 40 + [("a", 1, 1, None)] * 40)
        first = _naive(conn, 10, None, False, [])
        assert _claim(conn, 10, None, False) == first
        assert conn.execute(SETTING).fetchone()[0] == "15:15"
        for left in range(14, -1, -1):
            expected = _naive(conn, 10, None, False, [])
            assert _claim(conn, 10, None, False) == expected  # skipped: the general path, still exact
            assert conn.execute(SETTING).fetchone()[0] == f"{left}:15"
        assert _claim(conn, 10, None, False) is not None  # tried again, missed again
        assert conn.execute(SETTING).fetchone()[0] == "31:31"
        conn.execute("SELECT set_config('taskqueue.head_take', '0:200', false)")
        assert _claim(conn, 10, None, False) is not None
        assert conn.execute(SETTING).fetchone()[0] == "255:255"
        # A task that fits at the head: the next head take starts it and clears the count.
        _insert(conn, [("a", -1, 1, None)])
        ahead = _naive(conn, 10, None, False, [])
        conn.execute("SELECT set_config('taskqueue.head_take', '0:255', false)")
        assert _claim(conn, 10, None, False) == ahead
        assert conn.execute(SETTING).fetchone()[0] == ""


@pytest.mark.parametrize("value", ["garbage", ":::", "-1:5", "9999:1", "off", "p"])
def test_any_value_of_the_setting_leaves_the_claim_exact(dsn: str, value: str) -> None:
    """A value set by hand never makes a claim fail or take the wrong task;
    'off' keeps the session on the general path, and stays."""
    with _connect(dsn) as conn:
        _insert(conn, [("a", p, r, None) for p in range(5) for r in (1, 50)])
        conn.execute("SELECT set_config('taskqueue.head_take', %s, false)", (value,))
        for _ in range(4):
            expected = _naive(conn, 10, None, False, [])
            assert _claim(conn, 10, None, False) == expected
        if value == "off":
            assert conn.execute(SETTING).fetchone()[0] == "off"
