"""The boundary read by the index alone (fit_candidate v10, migration 0042) is exact and reads no table row.

Where sizes fall as ids grow and every size is its own, the fine bucket
that holds what is available + 1 holds the too-big rows first and the fits
after them, in claim order and in value order alike. Version 10 walks that
bucket with an index-only scan of ix_tasks_fit_fine (which now carries
each row's size and pool) and reads it with scalar aggregates. The claims
must still agree with the plain rule (tests/test_claim_exact.py's
reference): one priority and many, both orders, full pools, rows locked
elsewhere.
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


def falling_tasks(rng: random.Random, n: int, priorities: int, pools: bool) -> list[dict[str, Any]]:
    """Sizes from TOP down to FLOOR as the index grows: the newer half or so fits 1 GB."""
    return [{
        "payload": {},
        "queue": "a",
        "priority": rng.randrange(priorities),
        "required": TOP - (TOP - FLOOR) * i // n,
        "pool": rng.choice((None, None, None, "p0", "p1")) if pools else None,
    } for i in range(n)]


@pytest.mark.parametrize(("seed", "priorities", "pools"), [(0, 1, False), (1, 1, True), (2, 3, False), (3, 50, True)])
def test_falling_boundary_claims_match_the_reference(
    tq: TaskQueue, dsn: str, seed: int, priorities: int, pools: bool,
) -> None:
    rng = random.Random(900 + seed)
    tq.enqueue_many(falling_tasks(rng, 3000, priorities, pools))
    tq.set_pool_limit("p0", 0)
    tq.set_pool_limit("p1", 20)
    claims_match_the_reference(
        tq, dsn, rng, lambda: rng.choice((GB, GB, GB - rng.randrange(1, 900_000), TOP - rng.randrange(1, 5000))),
        limits=(1, 1, 3), lock_among=40,
    )


def _heap_blocks(conn: psycopg.Connection[Any]) -> int:
    conn.execute("SELECT pg_stat_force_next_flush()")
    conn.execute("SELECT pg_stat_clear_snapshot()")
    row = conn.execute(
        "SELECT heap_blks_hit + heap_blks_read FROM pg_statio_user_tables "
        "WHERE schemaname = 'taskqueue' AND relname = 'tasks'"
    ).fetchone()
    assert row is not None
    return int(row[0])


def test_the_boundary_walk_reads_the_index_alone(tq: TaskQueue, dsn: str) -> None:
    """20,000 tasks of one priority, sizes falling through the boundary: the
    first fit is the 10,002nd row in claim order. Over the index without the
    sizes (before migration 0042) this call read 216 heap blocks, a table row
    for each row walked; now 17, the rows it returns and looks up by id."""
    n, available = 20_000, (FLOOR + TOP) // 2
    tq.enqueue_many(falling_tasks(random.Random(5), n, 1, False))
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("VACUUM ANALYZE taskqueue.tasks")  # the visibility map, as autovacuum keeps it
    rows, pools = snapshot(dsn)
    expected = reference(rows, pools, available, 1, None, "min", set())
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("SET search_path TO taskqueue")
        table_pages = conn.execute("SELECT relpages FROM pg_class WHERE oid = 'tasks'::regclass").fetchone()
        assert table_pages is not None and table_pages[0] > 100, table_pages
        before = _heap_blocks(conn)
        got = conn.execute("SELECT id FROM fit_candidate(ARRAY['a'], %s, -2147483648, 0, false, '{}')",
                           (available,)).fetchone()
        read = _heap_blocks(conn) - before
    assert got is not None and [got[0]] == expected
    assert read <= 40, f"{read} heap blocks read by one boundary search over {table_pages[0]} pages"
