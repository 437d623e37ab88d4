"""A descending claim that loses its row reads on after it (claim_tasks v15).

Below 16 left, a descending claim asks the buckets first. When the row they
found was locked by a concurrent claim, version 14 asked the buckets again
from that row, three descents per bucket each time; with 8 consumers over
one queue whose tasks each have their own priority (deadlines_max), a claim
asked them 3.06 times. Version 15 reads the next rows in claim order (the
window) after a lost row, and goes on reading while it loses more.
"""

from __future__ import annotations

import psycopg
import pytest

from tests.test_claim_plan import _calls_in_transaction
from tests.test_claim_small_step import skip_step_s

pytestmark = pytest.mark.slow

CLAIM = "SELECT id FROM claim_tasks(4, {limit}, NULL, 'w', 60, true)"  # 4 available, descending


def _seed(conn: psycopg.Connection, rows: int = 5000, pool: str | None = None) -> None:
    """Every task its own priority; the ones that fit 4 hold the lowest 200 priorities (all in ``pool``)."""
    conn.execute("SELECT set_config('search_path', 'taskqueue', false)")
    conn.execute(
        "INSERT INTO tasks (queue, payload, priority, required, pool, state, max_attempts) "
        "SELECT 'default', '{}'::jsonb, g, CASE WHEN g <= 200 THEN 1 + g %% 4 ELSE 5 + (g * 7919) %% 60 END, %s, "
        "'queued', 3 FROM generate_series(1, %s) g", (pool, rows))
    conn.execute("ANALYZE tasks")


def _fits_in_claim_order(conn: psycopg.Connection, available: int, n: int) -> list[int]:
    return [int(r[0]) for r in conn.execute(
        "SELECT id FROM tasks WHERE state = 'queued' AND required <= %s ORDER BY priority DESC, id LIMIT %s",
        (available, n)).fetchall()]


@pytest.mark.parametrize("locked", [1, 3, 70])
def test_a_lost_row_sends_a_descending_claim_on_in_order_not_back_to_the_buckets(dsn: str, locked: int) -> None:
    """Another transaction holds the first ``locked`` fits: the claim takes the
    next fit in claim order, and asks the buckets once (version 14: once per
    lost row). 70 locked rows span two windows of 64. Step S (version 27),
    which settles fewer than 8 lost rows itself, is skipped."""
    with psycopg.connect(dsn) as conn, psycopg.connect(dsn) as other:
        _seed(conn)
        conn.commit()
        skip_step_s(conn)
        fits = _fits_in_claim_order(conn, 4, locked + 1)
        other.execute("SELECT set_config('search_path', 'taskqueue', false)")
        held = other.execute("SELECT id FROM tasks WHERE id = ANY (%s) FOR UPDATE", (fits[:locked],)).fetchall()
        assert len(held) == locked
        ids, calls = _calls_in_transaction(conn, CLAIM.format(limit=1))
        other.rollback()
    assert ids == [fits[locked]]
    assert calls.get("fit_candidate") == 1, calls


def test_claim_many_in_descending_order_passes_over_locked_rows_and_keeps_claim_order(dsn: str) -> None:
    """claim_many of 3 with 4 available: the first five fits are locked
    elsewhere, so the claim takes the next fits that still fit what is left,
    in claim order, as the naive query would."""
    with psycopg.connect(dsn) as conn, psycopg.connect(dsn) as other:
        _seed(conn)
        conn.commit()
        fits = _fits_in_claim_order(conn, 4, 200)
        other.execute("SELECT set_config('search_path', 'taskqueue', false)")
        other.execute("SELECT id FROM tasks WHERE id = ANY (%s) FOR UPDATE", (fits[:5],))
        ids, _ = _calls_in_transaction(conn, CLAIM.format(limit=3))
        expected, left = [], 4
        for row in conn.execute("SELECT id, required FROM tasks WHERE state = 'queued' AND id <> ALL (%s) "
                                "ORDER BY priority DESC, id", (fits[:5],)):
            if len(expected) == 3:
                break
            if row[1] <= left:
                expected.append(int(row[0]))
                left -= row[1]
        conn.rollback()
        other.rollback()
    assert ids == expected


def _seed_group(conn: psycopg.Connection, rows: int = 400, pool_every: int = 0) -> None:
    """Priorities 0..3, ``rows`` tasks each, every one fits 4 (needs 1..4); every ``pool_every``-th has a pool."""
    conn.execute("SELECT set_config('search_path', 'taskqueue', false)")
    conn.execute(
        "INSERT INTO tasks (queue, payload, priority, required, pool, state, max_attempts) "
        "SELECT 'default', '{}'::jsonb, g %% 4, 1 + g %% 4, "
        "CASE WHEN %s > 0 AND g %% %s = 0 THEN 'p' END, 'queued', 3 FROM generate_series(1, %s) g",
        (pool_every, max(pool_every, 1), rows * 4))
    conn.execute("ANALYZE tasks")


@pytest.mark.parametrize("locked", [1, 3, 70, 130])
def test_after_a_lost_row_one_task_is_read_and_started_as_the_look_starts_it(dsn: str, locked: int) -> None:
    """Version 18: the buckets' row is locked elsewhere, and so are the next
    ``locked - 1`` fits (70 and 130 span two and three windows of 64). The
    claim takes the next fit in claim order, with one descent of the buckets
    and no take_task call: each window is read into an array and its fits
    tried in one statement (version 15 called take_task once per fit), and
    from the 8th fit lost, step K's walks (version 33). Step
    S (version 27 descending), which settles fewer than 8 lost rows itself,
    is skipped."""
    with psycopg.connect(dsn) as conn, psycopg.connect(dsn) as other:
        _seed_group(conn)
        conn.commit()
        skip_step_s(conn)
        fits = _fits_in_claim_order(conn, 4, locked + 1)
        other.execute("SELECT set_config('search_path', 'taskqueue', false)")
        held = other.execute("SELECT id FROM tasks WHERE id = ANY (%s) FOR UPDATE", (fits[:locked],)).fetchall()
        assert len(held) == locked
        ids, calls = _calls_in_transaction(conn, CLAIM.format(limit=1))
        other.rollback()
    assert ids == [fits[locked]]
    # From the 8th fit lost, step K walks on (version 33) without asking the buckets again.
    assert calls.get("fit_candidate") == 1, calls
    assert "take_task" not in calls, calls


def test_after_a_lost_row_a_pooled_fit_ahead_is_still_taken_in_claim_order(dsn: str) -> None:
    """A pooled fit among the rows after the lost one: the one-statement try
    stops before it, and the cursor path takes it with its pool's slot, as
    claim order says (the fits after it wait)."""
    with psycopg.connect(dsn) as conn, psycopg.connect(dsn) as other:
        _seed_group(conn, pool_every=12)  # g % 12 = 0 has priority 0 and a pool: pooled fits at the lowest priority
        conn.execute("INSERT INTO pools (name, running_limit) VALUES ('p', 5)")
        conn.commit()
        order = [(int(r[0]), r[1]) for r in conn.execute(
            "SELECT id, pool FROM tasks WHERE state = 'queued' AND priority = 0 ORDER BY id").fetchall()]
        first_pooled = next(i for i, (_, pool) in enumerate(order) if pool is not None)
        assert first_pooled > 0
        # Everything of priorities 3..1 and the unpooled fits of priority 0 ahead of the pooled one: locked.
        held_ids = [int(r[0]) for r in conn.execute(
            "SELECT id FROM tasks WHERE priority > 0").fetchall()] + [i for i, _ in order[:first_pooled]]
        conn.rollback()
        other.execute("SELECT set_config('search_path', 'taskqueue', false)")
        other.execute("SELECT id FROM tasks WHERE id = ANY (%s) FOR UPDATE", (held_ids,))
        ids, _ = _calls_in_transaction(conn, CLAIM.format(limit=1))
        running = conn.execute("SELECT running FROM pools WHERE name = 'p'").fetchone()
        other.rollback()
    assert ids == [order[first_pooled][0]]
    assert running == (0,)  # _calls_in_transaction rolled the claim back, slot included
