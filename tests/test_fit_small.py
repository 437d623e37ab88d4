"""Below 16 left, fit_candidate's probes are one per amount (fit_candidate v5), and still exact.

Every level is exact there (a task's bucket is its required amount), so
version 5 asks ix_tasks_fit once per amount 0..left in one small statement
instead of the four-level statement. These tests call fit_candidate itself
on random rows (wide priorities, negative ones too, several queues, pools
of which some are known full) from random keys, in both orders, and compare
it with the rule stated plainly: the smallest key (priority or -priority,
id) after the given one among queued, unparked tasks of the listed queues
whose required fits and whose pool is not among the full ones.
"""

from __future__ import annotations

import random

import psycopg
import pytest

QUEUES = ("a", "b", "c")
POOLS = ("p0", "p1", "p2")


def _seed(conn: psycopg.Connection, rng: random.Random) -> list[tuple[int, str, int, int, str | None]]:
    conn.execute("SELECT set_config('search_path', 'taskqueue', false)")
    rows = []
    for i in range(1, 301):
        rows.append((i, rng.choice(QUEUES), rng.randint(-50, 50), rng.randint(0, 20), rng.choice((None, None, *POOLS))))
    with conn.cursor() as cur:
        cur.executemany(
            "INSERT INTO tasks (id, queue, payload, priority, required, pool, state, max_attempts) "
            "VALUES (%s, %s, '{}', %s, %s, %s, 'queued', 3)",
            rows,
        )
    conn.execute("ANALYZE tasks")
    return rows


def _reference(
    rows: list[tuple[int, str, int, int, str | None]],
    queues: list[str],
    remaining: int,
    key: tuple[int, int],
    descending: bool,
    full: list[str],
) -> int | None:
    best = None
    for task_id, queue, priority, required, pool in rows:
        k = (-priority if descending else priority, task_id)
        if queue in queues and required <= remaining and pool not in full and k > key and (best is None or k < best):
            best = k
    return None if best is None else best[1]


@pytest.mark.parametrize("seed", range(3))
def test_small_amounts_match_the_rule(dsn: str, seed: int) -> None:
    rng = random.Random(seed)
    with psycopg.connect(dsn) as conn:
        rows = _seed(conn, rng)
        checked = found = 0
        for _ in range(300):
            descending = rng.random() < 0.5
            remaining = rng.randint(0, 15)
            queues = rng.sample(QUEUES, rng.randint(1, 3))
            full = rng.sample(POOLS, rng.randint(0, 2))
            start = rng.choice(rows)
            key = rng.choice(((-(2**31) + 1, 0), ((-start[2] if descending else start[2]), start[0])))
            [(got,)] = conn.execute(
                "SELECT id FROM fit_candidate(%s, %s, %s, %s, %s, %s)",
                (queues, remaining, key[0], key[1], descending, full),
            ).fetchall()
            expected = _reference(rows, queues, remaining, key, descending, full)
            assert got == expected, f"queues={queues} remaining={remaining} key={key} desc={descending} full={full}"
            checked += 1
            found += got is not None
        conn.rollback()
    assert checked == 300 and found > 100  # most calls have an answer, so the comparison says something


def test_a_negative_amount_finds_nothing(dsn: str) -> None:
    with psycopg.connect(dsn) as conn:
        _seed(conn, random.Random(9))
        sql = "SELECT id FROM fit_candidate(ARRAY['a', 'b', 'c'], -1, -2147483647, 0, false, '{}')"
        [(got,)] = conn.execute(sql).fetchall()
        conn.rollback()
    assert got is None
