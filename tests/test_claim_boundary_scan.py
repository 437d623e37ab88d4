"""The boundary's scan in value order (fit_candidate v8) is exact, and it is the way taken where sizes do not repeat.

Sizes in bytes put every task of a shape into one fine bucket, the one that
holds what is available + 1: too-big tasks just above it, at the best
priorities, and the ones that fit just below it, each of its own size. The
walk in claim order reads every too-big task before a fit, and the visit
paid two probes per fitting size; the scan reads the fitting rows in
(required, priority, id) order. The claims must still agree with the plain
rule (tests/test_claim_exact.py's reference) in both orders, with full
pools and rows locked elsewhere, and where sizes repeat (the visit takes
over after the first scan).
"""

from __future__ import annotations

import random
from typing import Any

import psycopg
import pytest

from taskqueue import TaskQueue
from tests.test_claim_exact import claims_match_the_reference, reference, snapshot

GB = 1_000_000_000
# required_fine's bucket of GB + 1 is [998,244,352, 1,000,341,504): 2**21 sizes wide.
FLOOR, TOP = 998_244_352, 1_000_341_503


def boundary_tasks(rng: random.Random, n: int, repeat: int) -> list[Any]:
    """Too big first (better priorities), then fits; ``repeat`` rows share each size."""
    specs: list[Any] = []
    for i in range(n):
        fits = i >= n * 3 // 4 or rng.random() < 0.05
        size = FLOOR + (rng.randrange(GB - FLOOR + 1) // repeat) * repeat if fits else GB + 1 + rng.randrange(TOP - GB)
        specs.append({
            "payload": {},
            "queue": "a",
            "priority": rng.randint(-10**6, 10**6) if rng.random() < 0.3 else i,
            "required": size,
            "pool": rng.choice((None, None, None, "p0", "p1")),
        })
    return specs


@pytest.mark.parametrize(("seed", "repeat"), [(0, 1), (1, 1), (2, 1), (3, 40), (4, 40)])
def test_boundary_claims_match_the_reference(tq: TaskQueue, dsn: str, seed: int, repeat: int) -> None:
    rng = random.Random(700 + seed)
    tq.enqueue_many(boundary_tasks(rng, 2500, repeat))
    tq.set_pool_limit("p0", 0)
    tq.set_pool_limit("p1", 30)
    claims_match_the_reference(
        tq, dsn, rng, lambda: rng.choice((GB, GB, GB - rng.randrange(1, 500_000), FLOOR + rng.randrange(1, 5000))),
        limits=(1, 1, 3), lock_among=40,
    )


def _boundary_call(dsn: str, descending: bool) -> tuple[int | None, int]:
    """One fit_candidate call over the boundary: its task, and how many scans of ix_tasks_fit_exact it began."""
    sql = "SELECT id FROM fit_candidate(ARRAY['a'], %s, %s, 0, %s, '{}')"
    params = (GB, -2147483647 if descending else -2147483648, descending)  # claim_tasks' first key
    scans = "SELECT idx_scan FROM pg_stat_user_indexes WHERE indexrelname = 'ix_tasks_fit_exact'"
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("SET search_path TO taskqueue")
        before = conn.execute(scans).fetchone()[0]  # type: ignore[index]
        row = conn.execute(sql, params).fetchone()
        conn.execute("SELECT pg_stat_force_next_flush()")
        conn.execute("SELECT pg_stat_clear_snapshot()")
        after = conn.execute(scans).fetchone()[0]  # type: ignore[index]
    return (row[0] if row else None), after - before


@pytest.mark.parametrize("descending", [False, True])
def test_distinct_sizes_at_the_boundary_cost_rows_not_probes(tq: TaskQueue, dsn: str, descending: bool) -> None:
    """4,000 fitting sizes behind 16,000 too-big tasks, all in one fine bucket.
    fit_candidate v7 visited them, two probes of ix_tasks_fit_exact per size
    (1,168 scans of it in this call, 15,977 descending); v8 reads them in a
    few scans of growing length, each a range of the index."""
    rng = random.Random(9)
    n, fits = 20_000, 4_000
    specs: list[Any] = []
    for i in range(n):
        fit = i >= n - fits
        specs.append({
            "payload": {}, "queue": "a",
            "priority": (n - i) if descending else i,  # the fits at the worst priorities, either way
            "required": FLOOR + rng.randrange(GB - FLOOR + 1) if fit else GB + 1 + rng.randrange(TOP - GB),
        })
    tq.enqueue_many(specs)
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("VACUUM ANALYZE taskqueue.tasks")
    rows, pools = snapshot(dsn)
    expected = reference(rows, pools, GB, 1, None, "max" if descending else "min", set())
    got, scans = _boundary_call(dsn, descending)
    assert [got] == expected
    assert scans <= 10, scans
