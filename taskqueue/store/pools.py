"""Concurrency pools: releasing slots in a deadlock-free order, limits, and reads.

Statements: ``pools.sql``. Rows become :class:`~taskqueue.task.Pool` here.
"""

from __future__ import annotations

from ..task import Pool
from .requests import Op, Row, execute, first, rows


def pool_from_row(row: Row) -> Pool:
    return Pool(row["name"], row["running_limit"], row["running"])


def release_pools(counts: dict[str, int]) -> Op[bool]:
    """Take counts off several pools, locking them in name order first; True if a full pool got a slot."""
    if not counts:
        return False
    names = sorted(counts)
    yield from execute("lock_pools", names=names)
    found = yield from rows("release_pools", names=names, counts=[counts[n] for n in names])
    # True when a pool that was full before this release has a free slot now.
    return any(
        r["running_limit"] is not None and r["running"] < r["running_limit"] <= r["running"] + counts[r["name"]]
        for r in found
    )


def set_pool_limit(name: str, limit: int | None) -> Op[None]:
    yield from execute("set_pool_limit", name=name, limit=limit)


def pools() -> Op[list[Pool]]:
    found = yield from rows("list_pools")
    return [pool_from_row(r) for r in found]


def get_pool(name: str) -> Op[Pool | None]:
    row = yield from first("get_pool", name=name)
    return None if row is None else pool_from_row(row)
