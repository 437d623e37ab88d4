"""The fit buckets, stated plainly: required_bucket (four per doubling) and
required_fine (256 per doubling), as the claim's SQL reads them.

required_bucket v2 must give exactly version 1's values, since tasks.bucket
stores them; required_fine's floor formula (in fit_candidate v2) must be the
first value of each fine bucket; and every fine bucket lies in one bucket.
"""

from __future__ import annotations

import random

import psycopg

EXACT_BUCKET, EXACT_FINE = 16, 512


def bucket(r: int) -> int:
    """Version 1's rule: exact below 16, then the leading bit and the two after it."""
    if r < EXACT_BUCKET:
        return r
    h = r.bit_length() - 1
    return 4 * h + ((r >> (h - 2)) & 3)


def fine(r: int) -> int:
    if r < EXACT_FINE:
        return r
    h = r.bit_length() - 1
    return 256 * (h - 7) + (r >> (h - 8)) - 256


def fine_floor(f: int) -> int:
    """fit_candidate v2's inverse: the smallest value of fine bucket f."""
    return f if f < EXACT_FINE else ((f % 256) + 256) << (f // 256 - 1)


def edge_values() -> list[int]:
    rng = random.Random(5)
    values = set(range(0, 4096))
    for k in range(31):
        for d in (-2, -1, 0, 1, 2):
            if 0 <= 2**k + d <= 2**31 - 1:
                values.add(2**k + d)
    values.update(rng.randint(0, 2**31 - 1) for _ in range(20_000))
    values.add(2**31 - 1)
    return sorted(values)


def test_buckets_match_the_rule(dsn: str) -> None:
    values = edge_values()
    with psycopg.connect(dsn) as conn:
        got = conn.execute(
            "SELECT r, taskqueue.required_bucket(r), taskqueue.required_fine(r) FROM unnest(%s::integer[]) r ORDER BY r",
            (values,),
        ).fetchall()
    assert [(r, bucket(r), fine(r)) for r in values] == [tuple(row) for row in got]
    assert bucket(2**31 - 1) == 123 and fine(2**31 - 1) == 6143


def test_fine_buckets_nest_in_buckets() -> None:
    for f in range(6144):
        lo = fine_floor(f)
        assert fine(lo) == f and (lo == 0 or fine(lo - 1) == f - 1), f
        nxt = fine_floor(f + 1) if f < 6143 else 2**31
        assert bucket(lo) == bucket(nxt - 1), f  # a fine bucket never straddles two buckets
