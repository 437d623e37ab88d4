"""A descending walk of the boundary reads windows of many priorities (fit_candidate v12, migration 0051).

In order="max", fit_candidate walks the fine bucket that holds what is left
+ 1 in claim order, (priority DESC, id), taking turns with a scan of the
fitting rows in value order. Version 11's walk read the rest of its own
priority and one priority more a turn, so where every task has its own
priority it moved a row or two a turn and the scan read every fitting row of
the bucket. Version 12 reads a window backward a turn. A fit above the
window's cut (its lowest priority, which may go on below it) is the answer;
otherwise the next turn reads the cut's priority forward in id order from
its start, then the window below it.

Here every size is in the fine bucket of 1 GB + 1, so whole buckets hold
nothing and the boundary alone answers. The answers must be the plain rule's
(the first fit after the key in claim order, pools known full left out), and
a pile of tasks too big at the head must cost about its own rows, not the
bucket's fits.
"""

from __future__ import annotations

import random

import psycopg
import pytest

from tests.test_claim_plan import explain
from tests.test_foreign_index import USERS_INDEXES

GB = 1_000_000_000
# required_fine's bucket of GB + 1 is [998,244,352, 1,000,341,504).
FLOOR, TOP = 998_244_352, 1_000_341_503
FIND = "SELECT id FROM fit_candidate('{default}', %s, %s, %s, true, %s)"


def _insert(conn: psycopg.Connection, rows: list[tuple[int, int, str | None]]) -> list[int]:
    """(priority, required, pool) rows into queue 'default', queued; their ids in that order."""
    conn.execute("SELECT set_config('search_path', 'taskqueue', false)")
    ids = []
    with conn.cursor() as cur:
        for priority, required, pool in rows:
            cur.execute(
                "INSERT INTO tasks (queue, payload, priority, required, pool, state, max_attempts) "
                "VALUES ('default', '{}', %s, %s, %s, 'queued', 3) RETURNING id", (priority, required, pool))
            row = cur.fetchone()
            assert row is not None
            ids.append(row[0])
    return ids


def _expected(rows: dict[int, tuple[int, int, str | None]], available: int, key: tuple[int, int],
              full: list[str]) -> int | None:
    """The first fit after key in (-priority, id) order, pools known full left out."""
    after = [(-p, i) for i, (p, r, pool) in rows.items()
             if r <= available and (pool is None or pool not in full) and (-p, i) > key]
    return min(after)[1] if after else None


@pytest.mark.parametrize("seed", range(4))
def test_descending_boundary_answers_match_the_plain_rule(dsn: str, seed: int) -> None:
    """Mostly one task a priority, some priorities holding 40; about 30% fit; keys along the order."""
    rng = random.Random(5100 + seed)
    spec: list[tuple[int, int, str | None]] = []
    for p in rng.sample(range(-5000, 5000), 700):
        for _ in range(40 if rng.random() < 0.05 else 1):
            fits = rng.random() < 0.3
            spec.append((p, rng.randint(FLOOR, GB) if fits else rng.randint(GB + 1, TOP),
                         rng.choice((None, None, "p0", "p1"))))
    with psycopg.connect(dsn) as conn:
        ids = _insert(conn, spec)
        conn.execute("ANALYZE tasks")
        conn.commit()
        rows = dict(zip(ids, spec, strict=True))
        order = sorted((-p, i) for i, (p, _, _) in rows.items())
        keys = [(-2147483647, 0)] + [order[rng.randrange(len(order))] for _ in range(12)]
        for key in keys:
            for available in (GB, rng.randint(FLOOR, GB)):
                for full in ([], ["p0"]):
                    row = conn.execute(FIND, (available, key[0], key[1], full)).fetchone()
                    got = row[0] if row else None
                    assert got == _expected(rows, available, key, full), f"key {key} available {available} {full}"
        conn.rollback()


@pytest.mark.parametrize("users_index", [None, *USERS_INDEXES])
def test_a_pile_too_big_at_the_head_costs_its_rows_not_the_fits(dsn: str, users_index: str | None) -> None:
    """300 tasks too big at the best priorities, then 3,000 fits of distinct sizes below them,
    one row a page: the walk reaches the first fit in a few turns, where version 11 moved a
    row or two a turn and its scan read all 3,000 fits (3,239 buffers; 566 now). The window
    states its level as an equality, so a user's own (priority, id) index must not be
    chosen for it (tests/test_foreign_index.py)."""
    pile = [(10_000 - i, GB + 1 + i, None) for i in range(300)]
    fits = [(5_000 - i, FLOOR + 7 * i, None) for i in range(3000)]
    with psycopg.connect(dsn) as conn:
        conn.execute("SELECT set_config('search_path', 'taskqueue', false)")
        conn.execute("ALTER TABLE tasks SET (fillfactor = 10)")
        conn.execute(
            "INSERT INTO tasks (queue, payload, priority, required, state, max_attempts) "
            "SELECT 'default', jsonb_build_object('pad', repeat('x', 700)), p, r, 'queued', 3 "
            "FROM unnest(%s::int[], %s::int[]) AS s(p, r)",
            ([p for p, _, _ in pile + fits], [r for _, r, _ in pile + fits]))
        if users_index:
            conn.execute(users_index)
        conn.execute("ANALYZE tasks")
        conn.commit()
        sql = f"SELECT * FROM fit_candidate('{{default}}', {GB}, -2147483647, 0, true, '{{}}')"
        row = conn.execute(sql.replace("*", "required, -k1")).fetchone()
        conn.rollback()
        explain(conn, sql)
        buffers, plan = explain(conn, sql)
    assert row == (FLOOR, 5_000), "the first fit in claim order is the best priority below the pile"
    assert plan["Actual Rows"] == 1
    assert buffers < 1500, f"{buffers} buffers: the walk should pass the pile of 300 in a few turns"
