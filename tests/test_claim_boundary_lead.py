"""The walk of the boundary takes a lead over the scan when the scan has far to go (fit_candidate v15).

One queue, every task its own priority, sizes in bytes inside the fine bucket
that holds GB + 1. Descending, the best priorities hold a pile of tasks too
big; below them a third of the tasks fit, each of its own size. The walk in
claim order passes the pile and stops at the first fit; the scan in value
order would have to read every fit to be sure of the best. Version 14 gave
both equal turns (16, 64, 256 rows of the scan before a walk of 1,024 passed
a pile of 1,000); version 15 estimates the fits the scan has left after its
first turn and lets the walk run ahead. The answer must not change, and where
the scan is the cheaper way (few fits behind a long pile,
tests/test_claim_boundary_scan.py) it must still be taken.
"""

from __future__ import annotations

import random
from typing import Any

import psycopg
import pytest

from taskqueue import TaskQueue
from tests.test_claim_boundary_scan import FLOOR, GB, TOP
from tests.test_claim_exact import reference, snapshot

INDEX_ROWS = ("SELECT idx_tup_read FROM pg_stat_user_indexes "
              "WHERE schemaname = 'taskqueue' AND indexrelname = 'ix_tasks_fit_exact'")


def pile_then_fits(rng: random.Random, n: int, pile: int, share: float, descending: bool) -> list[Any]:
    """``pile`` tasks too big at the best priorities, then ``share`` of the rest fitting, each its own size."""
    specs: list[Any] = []
    for i in range(n):
        fits = i >= pile and rng.random() < share
        specs.append({
            "payload": {}, "queue": "a",
            "priority": (n - i) if descending else i,
            "required": FLOOR + rng.randrange(GB - FLOOR + 1) if fits else GB + 1 + rng.randrange(TOP - GB),
        })
    return specs


def scanned(dsn: str, descending: bool, available: int = GB) -> tuple[int | None, int]:
    """One fit_candidate call from the head of the order: its task, and the entries of ix_tasks_fit_exact it read."""
    call = "SELECT id FROM taskqueue.fit_candidate(ARRAY['a'], %s, %s, 0, %s, '{}')"
    with psycopg.connect(dsn, autocommit=True) as conn:
        def entries() -> int:
            conn.execute("SELECT pg_stat_force_next_flush()")
            conn.execute("SELECT pg_stat_clear_snapshot()")
            return int(conn.execute(INDEX_ROWS).fetchone()[0])  # type: ignore[index]
        before = entries()
        row = conn.execute(call, (available, -2147483647 if descending else -2147483648, descending)).fetchone()
        return (row[0] if row else None), entries() - before


def _seed(tq: TaskQueue, dsn: str, specs: list[Any]) -> None:
    tq.enqueue_many(specs)
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("VACUUM ANALYZE taskqueue.tasks")


@pytest.mark.parametrize("descending", [True, False])
def test_a_walk_bound_to_win_runs_ahead_of_the_scan(tq: TaskQueue, dsn: str, descending: bool) -> None:
    """A pile of 1,000 too big, then 30% of 39,000 fitting: the scan takes two turns, 16 + 64 rows
    (version 14: 336 rows of it, 16 + 64 + 256, before the walk's fourth turn found the fit)."""
    _seed(tq, dsn, pile_then_fits(random.Random(11), 40_000, 1_000, 0.3, descending))
    rows, pools = snapshot(dsn)
    expected = reference(rows, pools, GB, 1, None, "max" if descending else "min", set())
    got, read = scanned(dsn, descending)
    assert [got] == expected
    assert read <= 80, read


def test_few_fits_behind_a_long_pile_still_take_the_scan(tq: TaskQueue, dsn: str) -> None:
    """400 fits behind 16,000 too big: the scan's estimate is small, so it reads them all long
    before the walk could pass the pile; the call reads about the fits, not the pile."""
    _seed(tq, dsn, pile_then_fits(random.Random(12), 20_000, 16_000, 0.1, True))
    rows, pools = snapshot(dsn)
    expected = reference(rows, pools, GB, 1, None, "max", set())
    got, read = scanned(dsn, True)
    assert [got] == expected
    assert read <= 2 * sum(1 for r in rows if r.required <= GB), read


@pytest.mark.parametrize("seed", range(4))
def test_the_lead_never_changes_the_answer(tq: TaskQueue, dsn: str, seed: int) -> None:
    """Piles and shares drawn at random, both orders, amounts across the bucket: each call's task is the rule's."""
    rng = random.Random(300 + seed)
    descending = bool(seed % 2)
    _seed(tq, dsn, pile_then_fits(rng, 6_000, rng.randrange(0, 3_000), rng.choice((0.02, 0.3, 0.9)), descending))
    rows, pools = snapshot(dsn)
    for available in (GB, GB - 700_000, FLOOR + 5_000, TOP):
        expected = reference(rows, pools, available, 1, None, "max" if descending else "min", set())
        got, _ = scanned(dsn, descending, available)
        assert [got] == expected[:1] if expected else got is None, (available, got, expected)


def test_fits_crowded_at_the_floor_bound_the_walks_lead(tq: TaskQueue, dsn: str) -> None:
    """The estimate's weak spot: 1,000 fits crowded into the lowest 0.1% of the fitting range, behind
    30,000 too big. The first turns of the scan cover a sliver of the range and say the fits are
    hundreds of thousands, so the walk runs ahead; the lead is capped at 16 times the scan's rows, so
    the walk reads no more than that before the scan reads every fit (5,456 rows, against 1,360 with
    equal turns)."""
    rng = random.Random(13)
    specs = pile_then_fits(rng, 31_000, 30_000, 0.0, True)
    specs += [{"payload": {}, "queue": "a", "priority": -i, "required": FLOOR + rng.randrange(1_500)}
              for i in range(1_000)]
    _seed(tq, dsn, specs)
    rows, pools = snapshot(dsn)
    expected = reference(rows, pools, GB, 1, None, "max", set())
    fine = INDEX_ROWS.replace("ix_tasks_fit_exact", "ix_tasks_fit_fine")
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("SELECT pg_stat_force_next_flush()")
        conn.execute("SELECT pg_stat_clear_snapshot()")
        walked_before = conn.execute(fine).fetchone()[0]  # type: ignore[index]
    got, read = scanned(dsn, True)
    with psycopg.connect(dsn, autocommit=True) as conn:
        walked = conn.execute(fine).fetchone()[0] - walked_before  # type: ignore[index]
    assert [got] == expected
    assert read <= 1_100, read
    assert walked <= 6 * read, (walked, read)
