"""The boundary read with scalar aggregates (fit_candidate v10, migration 0042) is exact.

Where sizes fall as ids grow and every size is its own, the fine bucket
that holds what is available + 1 holds the too-big rows first and the fits
after them, in claim order and in value order alike. Version 10 reads that
bucket with plain aggregates (the last key of a walk from max(id) of its
own priority, the scan's best from min(id) of the best's priority) and a
plain index range for an ascending walk with no pool known full. The claims
must still agree with the plain rule (tests/test_claim_exact.py's
reference): one priority and many, both orders, full pools, rows locked
elsewhere.
"""

from __future__ import annotations

import random
from typing import Any

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
