"""What every scenario shares: the database, fresh schemas, client processes, the physical limit.

Numbers on a shared 2-core machine are noisy, so every scenario measures its
reference in the same run, side by side, and reports ratios to it.
"""

from __future__ import annotations

import contextlib
import multiprocessing as mp
import os
import statistics
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import psycopg
import psycopg.conninfo
import psycopg.sql
from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

DEFAULT_DSN = "postgresql://postgres@127.0.0.1:5432/bench"
TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100  # /proc's unit of CPU time, a second

console = Console(stderr=True)


@dataclass
class Options:
    dsn: str
    rows: int | None
    seconds: float | None
    churn_rows: int | None = None
    only: str | None = None
    old: str | None = None
    count: int | None = None
    seed: int | None = None
    wide: bool = False
    limit: int | None = None
    clients: int | None = None


def with_dbname(dsn: str, dbname: str) -> str:
    params = psycopg.conninfo.conninfo_to_dict(dsn)
    params["dbname"] = dbname
    return psycopg.conninfo.make_conninfo(**params)


def ensure_database(dsn: str) -> str:
    """Create the target database if it is missing; return the DSN unchanged."""
    name = psycopg.conninfo.conninfo_to_dict(dsn).get("dbname", "postgres")
    with psycopg.connect(with_dbname(dsn, "postgres"), autocommit=True) as conn:
        exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone()
        if not exists:
            conn.execute(psycopg.sql.SQL("CREATE DATABASE {}").format(psycopg.sql.Identifier(name)))
    return dsn


def server_facts(dsn: str) -> dict[str, Any]:
    with psycopg.connect(dsn, autocommit=True) as conn:
        version = conn.execute("SHOW server_version").fetchone()[0]
        sync = conn.execute("SHOW synchronous_commit").fetchone()[0]
        shared = conn.execute("SHOW shared_buffers").fetchone()[0]
    return {
        "server_version": version,
        "synchronous_commit": sync,
        "shared_buffers": shared,
        "cpus": os.cpu_count(),
    }


def fresh_queue(dsn: str, schema: str) -> Any:
    """A migrated, empty queue schema (dropped first if it exists)."""
    from taskqueue import TaskQueue

    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(psycopg.sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(psycopg.sql.Identifier(schema)))
    tq = TaskQueue(dsn, schema=schema)
    tq.migrate()
    return tq


def drop_schema(dsn: str, schema: str) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(psycopg.sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(psycopg.sql.Identifier(schema)))


@contextlib.contextmanager
def _on_schema(dsn: str, schema: str | None) -> Iterator[psycopg.Connection[Any]]:
    """An autocommit connection whose search_path is ``schema`` (None: the server's default)."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        if schema is not None:
            conn.execute("SELECT set_config('search_path', %s, false)", (f'"{schema}"',))
        yield conn


def execute(dsn: str, schema: str | None, *statements: str | tuple[str, Any]) -> None:
    """Run setup statements (bench-owned SQL, constants only) in autocommit."""
    with _on_schema(dsn, schema) as conn:
        for st in statements:
            if isinstance(st, tuple):
                conn.execute(st[0], st[1])
            else:
                conn.execute(st)


def scalar(dsn: str, schema: str | None, sql: str, params: Any = None) -> Any:
    with _on_schema(dsn, schema) as conn:
        row = conn.execute(sql, params).fetchone()
    return None if row is None else row[0]


def rows(dsn: str, schema: str | None, sql: str, params: Any = None) -> list[tuple[Any, ...]]:
    with _on_schema(dsn, schema) as conn:
        return conn.execute(sql, params).fetchall()


def relation_sizes(dsn: str, schema: str) -> dict[str, int]:
    """Bytes of the tasks table and of each of its indexes."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        rows = conn.execute(
            """
            SELECT c.relname, pg_relation_size(c.oid)
              FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
             WHERE n.nspname = %s AND c.relkind IN ('r', 'i')
             ORDER BY c.relname
            """,
            (schema,),
        ).fetchall()
    return {name: size for name, size in rows}


def progress() -> Progress:
    return Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        TextColumn("{task.completed:,.0f}/{task.total:,.0f}"),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        console=console,
        transient=False,
    )


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    k = min(len(ordered) - 1, max(0, int(round(q * (len(ordered) - 1)))))
    return ordered[k]


def latency_summary(seconds: list[float]) -> dict[str, float]:
    ms = [s * 1000.0 for s in seconds]
    return {
        "n": len(ms),
        "p50_ms": percentile(ms, 0.50),
        "p90_ms": percentile(ms, 0.90),
        "p99_ms": percentile(ms, 0.99),
        "mean_ms": statistics.fmean(ms) if ms else float("nan"),
    }


# -- client processes ------------------------------------------------------
ClientFn = Callable[[int, dict[str, Any], Any, Any], dict[str, Any]]


def _client_main(fn: ClientFn, idx: int, args: dict[str, Any], counter: Any, go: Any, stop: Any, out: Any) -> None:
    try:
        result = fn(idx, args, counter, (go, stop))
    except BaseException as exc:  # report, never hang the parent
        result = {"error": f"{type(exc).__name__}: {exc}"}
    out.put((idx, result))


def run_clients(
    fn: ClientFn,
    clients: int,
    args: dict[str, Any],
    *,
    label: str,
    total: float,
    seconds: float | None = None,
    marks: dict[str, Any] | None = None,
) -> tuple[float, list[dict[str, Any]], int]:
    """Run ``fn`` in ``clients`` processes, started together; return (elapsed, results, count).

    Each client adds to its shared counter as it works and returns when the
    stop event is set (after ``seconds``) or when its own work runs out.
    ``total`` is what the progress bar counts to. A ``marks`` dict gets the
    clock's two ends as ``(machine busy CPU seconds, this process's CPU
    seconds)`` under "go" and "end" (bench/cpu_split.py).
    """
    ctx = mp.get_context("fork")
    counters = [ctx.Value("q", 0, lock=False) for _ in range(clients)]
    go, stop = ctx.Event(), ctx.Event()
    out = ctx.Queue()
    procs = [
        ctx.Process(target=_client_main, args=(fn, i, args, counters[i], go, stop, out), daemon=True)
        for i in range(clients)
    ]
    for p in procs:
        p.start()
    ready_deadline = time.monotonic() + 60
    # clients signal readiness by setting their counter to -1
    while time.monotonic() < ready_deadline and any(c.value != -1 for c in counters):
        if any(not p.is_alive() for p in procs):
            break
        time.sleep(0.01)
    for c in counters:
        c.value = 0
    results: list[dict[str, Any]] = [{} for _ in range(clients)]
    with progress() as bar:
        task = bar.add_task(label, total=total)
        if marks is not None:
            marks["go"] = (machine_busy(), time.process_time())
        start = time.perf_counter()
        go.set()
        got = 0
        while got < clients:
            now = time.perf_counter()
            if seconds is not None and now - start >= seconds:
                stop.set()
            done = sum(max(0, c.value) for c in counters)
            bar.update(task, completed=min(done, total) if seconds is None else min(now - start, total))
            with contextlib.suppress(Exception):
                idx, res = out.get(timeout=0.1)
                results[idx] = res
                got += 1
        elapsed = time.perf_counter() - start
        if marks is not None:
            marks["end"] = (machine_busy(), time.process_time())
        bar.update(task, completed=total)
    stop.set()
    for p in procs:
        p.join(timeout=10)
    errors = [r["error"] for r in results if "error" in r]
    if errors:
        raise RuntimeError(f"{label}: client failed: {errors[0]}")
    count = sum(int(r.get("count", 0)) for r in results)
    return elapsed, results, count


def machine_jiffies() -> tuple[int, int] | None:
    """(all jiffies, idle + iowait jiffies) since boot, over every CPU (/proc/stat); None elsewhere."""
    try:
        with open("/proc/stat") as f:
            fields = [int(x) for x in f.readline().split()[1:]]
    except OSError:
        return None
    return sum(fields), fields[3] + fields[4]


def machine_busy() -> float | None:
    """CPU seconds the whole machine has been busy since boot, over every CPU; None elsewhere."""
    jiffies = machine_jiffies()
    return None if jiffies is None else (jiffies[0] - jiffies[1]) / TICK


#: In a client process: its CPU time (``time.process_time``) when the clock started, set by ``ready``.
#: bench/cpu_split.py reads it to count a client's CPU on the clock alone, not its imports and connecting.
started_cpu: float | None = None


def ready(counter: Any, sync: Any) -> Any:
    """Called by a client once connected: say so, wait for the start, return the stop event."""
    global started_cpu
    go, stop = sync
    counter.value = -1
    go.wait()
    started_cpu = time.process_time()
    return stop


def claim_complete_loop(tq: Any, stop: Any, counter: Any, *, limit: int = 1, cap: int | None = None,
                        **claim_args: Any) -> int:
    """A client's API loop: ``claim`` + ``complete`` (``limit`` 1) or ``claim_many`` + ``complete_many``.

    It runs until ``stop`` is set, ``cap`` tasks are done or a claim comes
    back empty, keeps ``counter`` at the count, and returns it.
    """
    n = 0
    while not stop.is_set() and (cap is None or n < cap):
        if limit == 1:
            task = tq.claim(**claim_args)
            if task is None:
                break
            tq.complete(task)
            n += 1
        else:
            got = tq.claim_many(limit=limit, **claim_args)
            if not got:
                break
            tq.complete_many([(t, None) for t in got])
            n += len(got)
        counter.value = n
    return n


# -- the physical limit ----------------------------------------------------
def _limit_client(idx: int, args: dict[str, Any], counter: Any, sync: Any) -> dict[str, Any]:
    with psycopg.connect(args["dsn"], autocommit=False) as conn:
        conn.prepare_threshold = 0
        cur = conn.cursor()
        stop = ready(counter, sync)
        n = 0
        while not stop.is_set():
            cur.execute("UPDATE bench_limit SET n = n + 1 WHERE id = %s", (idx,))
            conn.commit()
            n += 1
            counter.value = n
    return {"count": n}


def physical_limit(dsn: str, clients: int, seconds: float = 5.0) -> dict[str, Any]:
    """Single-row UPDATE + COMMIT per second at ``clients`` clients: the machine's own ceiling."""
    execute(
        dsn,
        None,
        "CREATE TABLE IF NOT EXISTS public.bench_limit (id integer PRIMARY KEY, n bigint NOT NULL DEFAULT 0)",
        ("INSERT INTO public.bench_limit (id) SELECT g FROM generate_series(0, %s) g ON CONFLICT DO NOTHING", (clients,)),
    )
    elapsed, _, count = run_clients(
        _limit_client, clients, {"dsn": dsn}, label=f"limit x{clients}", total=seconds, seconds=seconds
    )
    return {"clients": clients, "commits": count, "seconds": elapsed, "per_second": count / elapsed}


def ratio(value: float, reference: float) -> float:
    return value / reference if reference else float("nan")
