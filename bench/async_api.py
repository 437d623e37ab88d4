"""Issue 13: the asyncio API's single enqueue, beside the sync API and PGQueuer, in one run.

Each side enqueues the same number of no-op tasks one call at a time, one
awaited after the other, on one connection (PGQueuer's own ``Queries`` over
asyncpg, its documented driver, as its ``pgq`` tooling runs it). The async
sides run on asyncio's own loop and on uvloop, which ``pgq run`` uses; each
is compared at its best. A second
async figure awaits eight enqueues at once (``asyncio.gather`` over the
pool), which is what a web app under load does; PGQueuer's queries object
holds one connection, so it has no such figure. The async-handler drain is
``python -m bench drain`` (its ``async_noop`` cell).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

from taskqueue import AsyncTaskQueue

from . import common, peers

SCHEMA = "bench_async"
DEFAULT_SINGLES = 4_000
ROUNDS = 3


def _sync_single(dsn: str, n: int) -> float:
    tq = common.fresh_queue(dsn, SCHEMA)
    try:
        tq.enqueue(None)  # warm: the pool and the prepared statement
        t0 = time.perf_counter()
        for _ in range(n):
            tq.enqueue(None)
        return time.perf_counter() - t0
    finally:
        tq.close()


def _runner(uv: bool) -> Callable[[Any], float]:
    """asyncio's own event loop, or uvloop's (what PGQueuer's ``pgq run`` uses: its best)."""
    if uv:
        import uvloop

        return uvloop.run  # type: ignore[no-any-return]
    return asyncio.run


def _async_single(dsn: str, n: int, concurrent: int, uv: bool = False) -> float:
    common.fresh_queue(dsn, SCHEMA).close()

    async def go() -> float:
        async with AsyncTaskQueue(dsn, schema=SCHEMA, pool_size=concurrent) as atq:
            await asyncio.gather(*(atq.enqueue(None) for _ in range(concurrent)))  # warm every connection

            async def lane(count: int) -> None:
                for _ in range(count):
                    await atq.enqueue(None)

            t0 = time.perf_counter()
            await asyncio.gather(*(lane(n // concurrent) for _ in range(concurrent)))
            return time.perf_counter() - t0

    return _runner(uv)(go())


def _sqlalchemy_async_single(dsn: str, n: int) -> float:
    """The enqueue statement through SQLAlchemy's asyncio engine, a pool checkout per call: the runner not chosen.

    The same footing as AsyncTaskQueue's own runner (a pooled connection per
    call, autocommit, search_path set once per connection), without the
    queue's validation and mapping, so it flatters SQLAlchemy slightly.
    """
    import sqlalchemy as sa
    from sqlalchemy.ext.asyncio import create_async_engine

    from taskqueue.dsn import to_sqlalchemy_url
    from taskqueue.operations import enqueue as enqueue_op
    from taskqueue.sql import STATEMENTS

    common.fresh_queue(dsn, SCHEMA).close()
    params = dict(next(enqueue_op(None, channel="bench", queue="default")).params)  # type: ignore[union-attr]
    statement = sa.text(STATEMENTS["enqueue_task"])

    async def go() -> float:
        engine = create_async_engine(to_sqlalchemy_url(dsn), isolation_level="AUTOCOMMIT",
                                     connect_args={"options": f"-c search_path={SCHEMA}"})
        async with engine.connect() as conn:
            await conn.execute(statement, params)
        t0 = time.perf_counter()
        for _ in range(n):
            async with engine.connect() as conn:
                await conn.execute(statement, params)
        elapsed = time.perf_counter() - t0
        await engine.dispose()
        return elapsed

    return asyncio.run(go())


def run(opts: common.Options) -> dict[str, Any]:
    n = opts.rows or DEFAULT_SINGLES
    dsn = opts.dsn
    have_pgq = peers.available()["pgqueuer"]
    pdsn = peers.pgq_dsn(dsn) if have_pgq else ""
    sides: dict[str, list[float]] = {
        "sync": [], "async": [], "async_uvloop": [], "async_x8": [], "sqlalchemy_async": [],
        "pgqueuer": [], "pgqueuer_uvloop": [],
    }
    with common.progress() as bar:
        t = bar.add_task("single enqueue, sides interleaved", total=ROUNDS * len(sides))
        for _ in range(ROUNDS):  # interleaved, so drift on a shared machine hits every side alike
            sides["sync"].append(n / _sync_single(dsn, n))
            bar.advance(t)
            sides["async"].append(n / _async_single(dsn, n, 1))
            bar.advance(t)
            sides["async_uvloop"].append(n / _async_single(dsn, n, 1, uv=True))
            bar.advance(t)
            sides["async_x8"].append(n / _async_single(dsn, n, 8))
            bar.advance(t)
            sides["sqlalchemy_async"].append(n / _sqlalchemy_async_single(dsn, n))
            bar.advance(t)
            if have_pgq:
                peers.pgq_reset(pdsn)
                sides["pgqueuer"].append(n / peers.pgq_enqueue(pdsn, n, 1))
                peers.pgq_reset(pdsn)
                sides["pgqueuer_uvloop"].append(n / peers.pgq_enqueue(pdsn, n, 1, run=_runner(True)))
            bar.advance(t)
            bar.advance(t)
    common.drop_schema(dsn, SCHEMA)
    best = {side: max(values) for side, values in sides.items() if values}
    result: dict[str, Any] = {
        "scenario": "async_api",
        "singles": n,
        "rounds": ROUNDS,
        "per_second_best_of_rounds": best,
        "per_second_all_rounds": sides,
        "ratios": {
            "async_vs_sync": common.ratio(best["async"], best["sync"]),
            "async_x8_vs_sync": common.ratio(best["async_x8"], best["sync"]),
            "async_vs_sqlalchemy_async_statement": common.ratio(best["async"], best["sqlalchemy_async"]),
        },
    }
    if "pgqueuer" in best:  # against PGQueuer at its best, on either loop
        theirs = max(best["pgqueuer"], best["pgqueuer_uvloop"])
        ours = max(best["async"], best["async_uvloop"])
        result["ratios"]["async_best_loop_vs_pgqueuer_best_loop"] = common.ratio(ours, theirs)
        result["ratios"]["async_uvloop_vs_pgqueuer_uvloop"] = common.ratio(
            best["async_uvloop"], best["pgqueuer_uvloop"]
        )
        result["ratios"]["async_vs_pgqueuer_asyncio_loop"] = common.ratio(best["async"], best["pgqueuer"])
        result["ratios"]["sync_vs_pgqueuer_best_loop"] = common.ratio(best["sync"], theirs)
    return result
