"""The peers, driven through their own public APIs, each in a database of its own.

PGQueuer 1.6.0 (QueueManager in drain mode) and procrastinate 3.10 (App
worker with wait=False) come from the optional ``bench`` extra.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import psycopg

from . import common

PGQ_DB = "bench_pgqueuer"
PROC_DB = "bench_procrastinate"


def available() -> dict[str, str | None]:
    versions: dict[str, str | None] = {}
    for name in ("pgqueuer", "procrastinate"):
        try:
            from importlib.metadata import version

            versions[name] = version(name)
        except Exception:
            versions[name] = None
    return versions


# -- PGQueuer ----------------------------------------------------------------
def pgq_dsn(dsn: str) -> str:
    return common.ensure_database(common.with_dbname(dsn, PGQ_DB))


async def _pgq_queries(dsn: str) -> tuple[Any, Any]:
    from pgqueuer import Queries

    conn = await psycopg.AsyncConnection.connect(dsn, autocommit=True)
    return conn, Queries.from_psycopg_connection(conn)


def pgq_reset(dsn: str) -> None:
    async def go() -> None:
        conn, q = await _pgq_queries(dsn)
        try:
            await q.uninstall()
        except Exception:
            pass
        await q.install()
        await conn.close()

    asyncio.run(go())


def pgq_enqueue(dsn: str, n: int, batch: int, *, run: Callable[[Any], float] = asyncio.run) -> float:
    """Enqueue n no-op jobs, ``batch`` per call (1: one at a time); return seconds. ``run``: the event loop's
    runner (``uvloop.run`` for PGQueuer's best)."""

    async def go() -> float:
        conn, q = await _pgq_queries(dsn)
        t0 = time.perf_counter()
        done = 0
        while done < n:
            k = min(batch, n - done)
            if batch == 1:
                await q.enqueue("noop", None)
            else:
                await q.enqueue(["noop"] * k, [None] * k, [0] * k)
            done += k
        elapsed = time.perf_counter() - t0
        await conn.close()
        return elapsed

    return run(go())


def _pgq_worker(idx: int, args: dict[str, Any], counter: Any, sync: Any) -> dict[str, Any]:
    from pgqueuer import QueueManager
    from pgqueuer.domain.types import QueueExecutionMode

    logging.getLogger("pgqueuer").setLevel(logging.WARNING)

    async def go() -> int:
        conn, q = await _pgq_queries(args["dsn"])
        qm = QueueManager(q)
        n = 0

        @qm.entrypoint("noop")
        async def noop(job: Any) -> None:
            nonlocal n
            n += 1
            counter.value = n

        common.ready(counter, sync)
        await qm.run(
            batch_size=args["batch"],
            mode=QueueExecutionMode.drain,
            dequeue_timeout=timedelta(seconds=0.5),
            log_aggregation_interval=timedelta(0),
        )
        await conn.close()
        return n

    return {"count": asyncio.run(go())}


def pgq_drain(dsn: str, n: int, processes: int, batch: int) -> dict[str, Any]:
    pgq_reset(dsn)
    pgq_enqueue(dsn, n, 10_000)
    elapsed, _, count = common.run_clients(
        _pgq_worker, processes, {"dsn": dsn, "batch": batch}, label=f"pgqueuer b{batch}", total=n
    )
    return {"jobs": count, "seconds": elapsed, "per_second": count / elapsed, "batch_size": batch}


# -- procrastinate -------------------------------------------------------------
def proc_dsn(dsn: str) -> str:
    return common.ensure_database(common.with_dbname(dsn, PROC_DB))


def _proc_app(dsn: str) -> Any:
    import procrastinate

    app = procrastinate.App(connector=procrastinate.PsycopgConnector(conninfo=dsn))

    @app.task(name="noop", queue="bench")
    async def noop() -> None:
        return None

    return app, noop


def proc_reset(dsn: str) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("DROP SCHEMA public CASCADE")
        conn.execute("CREATE SCHEMA public")
    app, _ = _proc_app(dsn)

    async def go() -> None:
        async with app.open_async():
            await app.schema_manager.apply_schema_async()

    asyncio.run(go())


def proc_enqueue(dsn: str, n: int, batch: int) -> float:
    app, noop = _proc_app(dsn)

    async def go() -> float:
        async with app.open_async():
            t0 = time.perf_counter()
            done = 0
            while done < n:
                k = min(batch, n - done)
                if batch == 1:
                    await noop.defer_async()
                else:
                    await noop.batch_defer_async(*([{}] * k))
                done += k
            return time.perf_counter() - t0

    return asyncio.run(go())


def _proc_worker(idx: int, args: dict[str, Any], counter: Any, sync: Any) -> dict[str, Any]:
    logging.getLogger("procrastinate").setLevel(logging.WARNING)
    app, _ = _proc_app(args["dsn"])

    async def go() -> None:
        async with app.open_async():
            common.ready(counter, sync)
            await app.run_worker_async(
                queues=["bench"], wait=False, concurrency=args["concurrency"], install_signal_handlers=False
            )

    asyncio.run(go())
    return {"count": 0}


def proc_drain(dsn: str, n: int, processes: int, concurrency: int = 10) -> dict[str, Any]:
    proc_reset(dsn)
    proc_enqueue(dsn, n, 10_000)
    elapsed, _, _ = common.run_clients(
        _proc_worker, processes, {"dsn": dsn, "concurrency": concurrency}, label="procrastinate", total=n
    )
    with psycopg.connect(dsn) as conn:
        done = conn.execute("SELECT count(*) FROM procrastinate_jobs WHERE status = 'succeeded'").fetchone()[0]
    return {"jobs": done, "seconds": elapsed, "per_second": done / elapsed, "concurrency": concurrency}
