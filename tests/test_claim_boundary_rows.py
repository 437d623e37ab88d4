"""The boundary read with scalar aggregates (fit_candidate v10, migration 0042) and walked
by spans of ids (v11, migration 0043) is exact.

Where sizes fall as ids grow and every size is its own, the fine bucket
that holds what is available + 1 holds the too-big rows first and the fits
after them, in claim order and in value order alike. Version 10 reads that
bucket with plain aggregates (the last key of a walk from max(id) of its
own priority, the scan's best from min(id) of the best's priority) and a
plain index range for an ascending walk with no pool known full. The claims
must still agree with the plain rule (tests/test_claim_exact.py's
reference): one priority and many, both orders, full pools, rows locked
elsewhere. Version 11's walk takes a span of ids a turn, so ids far apart
(few rows to a span, spans near the top of bigint) must not change a claim.
"""

from __future__ import annotations

import random
from typing import Any

import psycopg
import pytest

from taskqueue import TaskQueue
from tests.test_claim_exact import claims_match_the_reference

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


@pytest.mark.parametrize(("seed", "priorities"), [(0, 1), (1, 4)])
def test_ids_far_apart_match_the_reference(tq: TaskQueue, dsn: str, seed: int, priorities: int) -> None:
    """Ids jump by up to 10**15 between small batches, the last ones near 2**62: a walk's
    span of ids holds few of the bucket's rows, or none, and its end is computed near the top."""
    rng = random.Random(950 + seed)
    tasks = falling_tasks(rng, 1200, priorities, pools=True)
    with psycopg.connect(dsn, autocommit=True) as conn:
        for start in range(0, len(tasks), 40):
            tq.enqueue_many(tasks[start:start + 40])
            jump = 2**62 // 40 if start >= len(tasks) - 200 else rng.choice((1, 1000, 10**9, 10**15))
            conn.execute("SELECT setval(pg_get_serial_sequence('taskqueue.tasks', 'id'), "
                         "(SELECT max(id) FROM taskqueue.tasks) + %s)", (jump,))
    tq.set_pool_limit("p0", 0)
    tq.set_pool_limit("p1", 20)
    claims_match_the_reference(
        tq, dsn, rng, lambda: rng.choice((GB, GB, GB - rng.randrange(1, 900_000), TOP - rng.randrange(1, 5000))),
        limits=(1, 1, 3), lock_among=40,
    )
