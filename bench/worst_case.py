"""Target 1: seed 000's worst case.

N queued tasks over priorities 0..9. Priorities 0..8 all need more than the
consumer has; only priority 9 fits (0.5% of rows, ids spread through the
table). The naive ``WHERE required <= :avail ORDER BY priority, id`` claim
(given its natural (priority, id) index) is measured against ours with the
same 8 consumer processes, then our single-consumer p99 at a 10k backlog and
at the full one.
"""

from __future__ import annotations

import time
from typing import Any

import psycopg

from . import common

AVAILABLE = 10
CLIENTS = 8
DEFAULT_ROWS = 1_000_000
SMALL_ROWS = 10_000
SCHEMA = "bench_worst"
SMALL_SCHEMA = "bench_worst_small"

SEED = """
INSERT INTO tasks (queue, payload, priority, required, state, max_attempts)
SELECT 'default', '{}'::jsonb,
       CASE WHEN g %% 200 = 0 THEN 9 ELSE (g * 31) %% 9 END,
       CASE WHEN g %% 200 = 0 THEN 1 + (g / 200) %% 10 ELSE 11 + (g * 7919) %% 90 END,
       'queued', 3
  FROM generate_series(1::bigint, %s) g
"""

RESET = """
UPDATE tasks SET state = 'queued', attempts = 0, worker = NULL, lease_token = NULL,
       lease_seconds = NULL, lease_expires_at = NULL, started_at = NULL
 WHERE state = 'running'
"""

NAIVE = """
WITH c AS MATERIALIZED (
    SELECT id FROM tasks
     WHERE state = 'queued' AND required <= %s
     ORDER BY priority, id
     LIMIT 1 FOR UPDATE SKIP LOCKED)
UPDATE tasks t
   SET state = 'running', attempts = t.attempts + 1, started_at = now(), worker = %s,
       lease_token = gen_random_uuid(), lease_seconds = 60,
       lease_expires_at = now() + interval '60 seconds'
  FROM c WHERE t.id = c.id
RETURNING t.id, t.priority, t.required
"""


def seed(dsn: str, schema: str, rows: int) -> int:
    """Fill a fresh schema; return how many rows fit."""
    common.fresh_queue(dsn, schema).close()
    common.execute(dsn, schema, (SEED, (rows,)), "VACUUM ANALYZE tasks")
    return int(common.scalar(dsn, schema, "SELECT count(*) FROM tasks WHERE required <= %s", (AVAILABLE,)))


def reset(dsn: str, schema: str) -> None:
    common.execute(dsn, schema, RESET, "VACUUM ANALYZE tasks")


def _naive_client(idx: int, args: dict[str, Any], counter: Any, sync: Any) -> dict[str, Any]:
    with psycopg.connect(args["dsn"]) as conn:
        conn.execute("SELECT set_config('search_path', %s, false)", (f'"{args["schema"]}"',))
        conn.commit()
        stop = common.ready(counter, sync)
        n, bad = 0, 0
        while not stop.is_set() and n < args["cap"]:
            row = conn.execute(NAIVE, (AVAILABLE, f"naive-{idx}")).fetchone()
            conn.commit()
            if row is None:
                break
            bad += row[1] != 9 or row[2] > AVAILABLE
            n += 1
            counter.value = n
    return {"count": n, "wrong": bad}


def _ours_client(idx: int, args: dict[str, Any], counter: Any, sync: Any) -> dict[str, Any]:
    from taskqueue import TaskQueue

    tq = TaskQueue(args["dsn"], schema=args["schema"], pool_size=1, max_overflow=0)
    tq.peek(available=AVAILABLE)  # connect and warm the plan cache, claiming nothing
    stop = common.ready(counter, sync)
    n, bad = 0, 0
    lat: list[float] = []
    while not stop.is_set() and n < args["cap"]:
        t0 = time.perf_counter()
        task = tq.claim(available=AVAILABLE, worker=f"ours-{idx}")
        lat.append(time.perf_counter() - t0)
        if task is None:
            break
        bad += task.priority != 9 or task.required > AVAILABLE
        n += 1
        counter.value = n
    tq.close()
    return {"count": n, "wrong": bad, "lat": lat}


def claim_buffers(dsn: str, schema: str) -> dict[str, int]:
    """Shared buffers one claim touches (hit + read), from EXPLAIN (ANALYZE, BUFFERS), rolled back."""
    with psycopg.connect(dsn) as conn:
        conn.execute("SELECT set_config('search_path', %s, false)", (f'"{schema}"',))
        conn.commit()
        # the second call: the first also reads the catalog to plan the function's statements
        for _ in range(2):
            plan = conn.execute(
                "EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) "
                "SELECT * FROM claim_tasks(%s, 1, NULL, 'explain', 60, false)",
                (AVAILABLE,),
            ).fetchone()[0]
            conn.rollback()
    top = plan[0]["Plan"]
    return {"shared_hit": top.get("Shared Hit Blocks", 0), "shared_read": top.get("Shared Read Blocks", 0)}


def paired_latency(dsn: str, sizes: list[tuple[str, int]], samples: int) -> list[dict[str, float]]:
    """One consumer per backlog, claims in sequence, the backlogs taking turns every 40 claims.

    Taking turns puts both under the same load from the rest of the machine,
    so their ratio is fair. Claimed rows are put back (untimed) before a
    backlog runs short of fitting rows.
    """
    from taskqueue import TaskQueue

    step = 40
    queues = [TaskQueue(dsn, schema=schema, pool_size=1) for schema, _ in sizes]
    lat: list[list[float]] = [[] for _ in sizes]
    taken = [0 for _ in sizes]
    try:
        for tq in queues:
            tq.peek(available=AVAILABLE)
        with common.progress() as bar:
            task = bar.add_task("latency " + " / ".join(schema for schema, _ in sizes), total=samples * len(sizes))
            while min(len(x) for x in lat) < samples:
                for i, (schema, fit) in enumerate(sizes):
                    if taken[i] + step > fit * 0.8:
                        reset(dsn, schema)
                        taken[i] = 0
                    for _ in range(step):
                        t0 = time.perf_counter()
                        got = queues[i].claim(available=AVAILABLE, worker="latency")
                        lat[i].append(time.perf_counter() - t0)
                        if got is None or got.priority != 9:
                            raise RuntimeError(f"claim returned {got!r}")
                    taken[i] += step
                bar.update(task, completed=sum(min(len(x), samples) for x in lat))
    finally:
        for tq in queues:
            tq.close()
    for schema, _ in sizes:
        reset(dsn, schema)
    return [common.latency_summary(x[:samples]) for x in lat]


def run(opts: common.Options) -> dict[str, Any]:
    rows = opts.rows or DEFAULT_ROWS
    seconds = opts.seconds or 10.0
    dsn = opts.dsn
    common.console.log(f"worst_case: seeding {rows:,} rows")
    fit = seed(dsn, SCHEMA, rows)
    cap = max(1, int(fit * 0.8)) // CLIENTS

    # The naive claim gets the index its ORDER BY wants, and only for its own run.
    common.execute(dsn, SCHEMA, "CREATE INDEX bench_naive ON tasks (priority, id) WHERE state = 'queued'", "ANALYZE tasks")
    args = {"dsn": dsn, "schema": SCHEMA, "cap": cap}
    n_elapsed, n_res, n_count = common.run_clients(
        _naive_client, CLIENTS, args, label="naive x8", total=seconds, seconds=seconds
    )
    common.execute(dsn, SCHEMA, "DROP INDEX bench_naive")
    reset(dsn, SCHEMA)

    o_elapsed, o_res, o_count = common.run_clients(
        _ours_client, CLIENTS, args, label="ours x8", total=cap * CLIENTS, seconds=seconds
    )
    o_lat = [x for r in o_res for x in r["lat"]]
    reset(dsn, SCHEMA)
    buffers_big = claim_buffers(dsn, SCHEMA)

    samples = 2000
    small_rows = min(SMALL_ROWS, rows)
    small_fit = seed(dsn, SMALL_SCHEMA, small_rows)
    small, big = paired_latency(dsn, [(SMALL_SCHEMA, small_fit), (SCHEMA, fit)], samples)
    buffers_small = claim_buffers(dsn, SMALL_SCHEMA)
    limit = common.physical_limit(dsn, CLIENTS)
    common.drop_schema(dsn, SMALL_SCHEMA)

    naive_rate = n_count / n_elapsed
    ours_rate = o_count / o_elapsed
    return {
        "scenario": "worst_case",
        "rows": rows,
        "fitting_rows": fit,
        "available": AVAILABLE,
        "clients": CLIENTS,
        "naive": {"claims": n_count, "seconds": n_elapsed, "per_second": naive_rate,
                  "wrong": sum(r["wrong"] for r in n_res)},
        "ours": {"claims": o_count, "seconds": o_elapsed, "per_second": ours_rate,
                 "wrong": sum(r["wrong"] for r in o_res), "latency_8_clients": common.latency_summary(o_lat)},
        "speedup_vs_naive": common.ratio(ours_rate, naive_rate),
        "latency_single_client": {f"{small_rows}": small, f"{rows}": big},
        "p99_growth": common.ratio(big["p99_ms"], small["p99_ms"]),
        "claim_buffers": {f"{small_rows}": buffers_small, f"{rows}": buffers_big},
        "limit": limit,
        "ours_vs_limit": common.ratio(ours_rate, limit["per_second"]),
        "naive_vs_limit": common.ratio(naive_rate, limit["per_second"]),
        "targets": {
            "speedup_100x": common.ratio(ours_rate, naive_rate) >= 100,
            "p99_growth_le_1_5": common.ratio(big["p99_ms"], small["p99_ms"]) <= 1.5,
        },
    }
