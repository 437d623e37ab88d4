"""The fit levels, stated plainly, as the claim's SQL reads them:
required_class (one per doubling), required_bucket (four), required_mid (32)
and required_fine (256).

required_bucket v2 must give exactly version 1's values, since tasks.bucket
stores them; each floor formula in fit_candidate v3 must be the first value
of its bucket; and every bucket of a level lies in one bucket of the level
above, or fit_candidate's whole ranges would miss or repeat amounts.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from itertools import pairwise

import psycopg

EXACT_BUCKET, EXACT_MID, EXACT_FINE = 16, 64, 512
TOP = 2**31  # one past the largest amount
Level = Callable[[int], int]


def klass(r: int) -> int:
    return r.bit_length()


def class_floor(c: int) -> int:
    return 0 if c == 0 else 1 << (c - 1)


def bucket(r: int) -> int:
    """Version 1's rule: exact below 16, then the leading bit and the two after it."""
    if r < EXACT_BUCKET:
        return r
    h = r.bit_length() - 1
    return 4 * h + ((r >> (h - 2)) & 3)


def bucket_floor(b: int) -> int:
    return b if b < EXACT_BUCKET else (4 + b % 4) << (b // 4 - 2)


def mid(r: int) -> int:
    if r < EXACT_MID:
        return r
    h = r.bit_length() - 1
    return 32 * (h - 6) + (r >> (h - 5)) + 32


def mid_floor(m: int) -> int:
    return m if m < EXACT_MID else ((m - 64) % 32 + 32) << ((m - 64) // 32 + 1)


def fine(r: int) -> int:
    if r < EXACT_FINE:
        return r
    h = r.bit_length() - 1
    return 256 * (h - 7) + (r >> (h - 8)) - 256


def fine_floor(f: int) -> int:
    """fit_candidate's inverse: the smallest value of fine bucket f."""
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
            "SELECT r, taskqueue.required_class(r), taskqueue.required_bucket(r), taskqueue.required_mid(r),"
            " taskqueue.required_fine(r) FROM unnest(%s::integer[]) r ORDER BY r",
            (values,),
        ).fetchall()
    assert [(r, klass(r), bucket(r), mid(r), fine(r)) for r in values] == [tuple(row) for row in got]
    assert (klass(TOP - 1), bucket(TOP - 1), mid(TOP - 1), fine(TOP - 1)) == (31, 123, 863, 6143)


def _check_level(level: Level, floor: Level, top: int, coarser: Level) -> None:
    """Each bucket of ``level`` starts at ``floor`` and lies in one bucket of ``coarser``."""
    for n in range(top + 1):
        lo = floor(n)
        assert level(lo) == n and (lo == 0 or level(lo - 1) == n - 1), n
        nxt = floor(n + 1) if n < top else TOP
        assert coarser(lo) == coarser(nxt - 1), n  # never straddles a coarser bucket


def test_fine_buckets_nest_in_buckets() -> None:
    _check_level(fine, fine_floor, 6143, bucket)


def test_every_level_nests_in_the_one_above() -> None:
    _check_level(bucket, bucket_floor, 123, klass)
    _check_level(mid, mid_floor, 863, bucket)
    _check_level(fine, fine_floor, 6143, mid)
    for c in range(32):
        assert klass(class_floor(c)) == c


def test_whole_ranges_and_the_boundary_cover_every_fitting_amount_once() -> None:
    """fit_candidate v3's cut of [0, available]: whole classes, then the whole
    buckets, mids and fines inside the boundary bucket of the level above,
    then the fine bucket that holds available + 1 up to available."""
    rng = random.Random(9)
    for available in [*range(0, 700), *(rng.randint(0, TOP - 2) for _ in range(300)), TOP - 2]:
        x = available + 1
        cx, bx, mx, fx = klass(x), bucket(x), mid(x), fine(x)
        ranges = [(class_floor(0), class_floor(cx)),
                  (bucket_floor(bucket(class_floor(cx))), bucket_floor(bx)),
                  (mid_floor(mid(bucket_floor(bx))), mid_floor(mx)),
                  (fine_floor(fine(mid_floor(mx))), fine_floor(fx)),
                  (fine_floor(fx), x)]
        assert ranges[0][0] == 0 and ranges[-1][1] == x, available
        for (_, hi), (lo, _) in pairwise(ranges):
            assert hi == lo, (available, ranges)  # contiguous: nothing missed, nothing twice
        assert cx <= 32 and bx - bucket(class_floor(cx)) <= (3 if x >= EXACT_BUCKET else 7), available
        assert mx - mid(bucket_floor(bx)) <= 7 and fx - fine(mid_floor(mx)) <= 7, available
