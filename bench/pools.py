"""Target 2: full pools (seed 002).

N tasks spread over 2,000 /24 pools with limit 2; 90% of the tasks sit in
pools that are already full (two running tasks held by another worker).
Consumers claim and complete in a loop. The same consumers then run the same
workload with no pools at all; the target is a ratio of at least 0.5.

``--only big`` (also part of a full run): one big pool. Half of the tasks,
interleaved with the other half by id, belong to one pool of limit 2, the
rest to none, as when a scanner queues one large network beside other work.
``--only big_head``: the same, with the pool's half queued first (ids
1..N/2), so every claim of other work must get past all of it.
``--only slow`` (also part of a full run): one pool of limit 1 whose tasks
run 2 s (a consumer that takes one holds it that long), 20,000 of them
queued ahead of 200,000 other tasks. The pool is full for longer than the
quiet second after each release, so its backlog is parked between releases
and every release unparks all of it. Ours against the naive loop; the
figures are the other tasks' claims a second and what each release costs.
Ours is measured against the same rows with no pools, and against a naive
loop that maintains the pool's count itself (claim: the first queued task
whose pool is not full, FOR UPDATE SKIP LOCKED, then the pool's count +1;
complete: done, then the count -1). Reported, not a target: it shows what a
release that unparks a large pool costs.
"""

from __future__ import annotations

import time
from typing import Any

from . import common

CLIENTS = 8
DEFAULT_ROWS = 200_000
POOLS = 2_000
FULL_SHARE = 0.9
SCHEMA = "bench_pools"
OVER_LIMIT = "SELECT count(*) FROM pools WHERE running_limit IS NOT NULL AND running > running_limit"

SEED_POOLS = """
INSERT INTO pools (name, running_limit, running)
SELECT '10.' || (p / 256) || '.' || (p %% 256) || '.0/24', 2, CASE WHEN p < %(full)s THEN 2 ELSE 0 END
  FROM generate_series(0, %(pools)s - 1) p
"""

# Two running tasks per full pool, so the counters are exact.
SEED_HOLDERS = """
INSERT INTO tasks (queue, payload, priority, required, pool, state, attempts, max_attempts,
                   worker, lease_token, lease_seconds, lease_expires_at, started_at)
SELECT 'default', '{}'::jsonb, 0, 0, '10.' || (p / 256) || '.' || (p %% 256) || '.0/24', 'running', 1, 3,
       'holder', gen_random_uuid(), 3600, now() + interval '1 hour', now()
  FROM generate_series(0, %(full)s - 1) p, generate_series(1, 2)
"""

# Pools spread through the id order (a multiplicative hash of the row number).
SEED_TASKS = """
INSERT INTO tasks (queue, payload, priority, required, pool, state, max_attempts)
SELECT 'default', '{}'::jsonb, 0, 0,
       CASE WHEN %(pooled)s THEN '10.' || (x.p / 256) || '.' || (x.p %% 256) || '.0/24' END,
       'queued', 3
  FROM (SELECT g, CASE WHEN (g * 7919) %% 10 < %(full_tenths)s
                       THEN (g * 104729) %% %(full)s
                       ELSE %(full)s + (g * 104729) %% (%(pools)s - %(full)s) END AS p
          FROM generate_series(1::bigint, %(rows)s) g) x
 ORDER BY x.g
"""


def seed(dsn: str, rows: int, pooled: bool) -> None:
    common.fresh_queue(dsn, SCHEMA).close()
    full = int(POOLS * FULL_SHARE)
    params = {"rows": rows, "pools": POOLS, "full": full, "full_tenths": int(FULL_SHARE * 10), "pooled": pooled}
    statements: list[Any] = [(SEED_TASKS, params)]
    if pooled:
        statements = [(SEED_POOLS, params), (SEED_HOLDERS, params), *statements]
    common.execute(dsn, SCHEMA, *statements, "VACUUM ANALYZE tasks", "VACUUM ANALYZE pools")


def _client(idx: int, args: dict[str, Any], counter: Any, sync: Any) -> dict[str, Any]:
    from taskqueue import TaskQueue

    # The defaults, as a user's: one thread, one connection held for its one-statement calls.
    tq = TaskQueue(args["dsn"], schema=args.get("schema", SCHEMA))
    tq.peek()
    stop = common.ready(counter, sync)
    n = 0
    lat: list[float] = []
    released: list[float] = []
    while not stop.is_set():
        t0 = time.perf_counter()
        task = tq.claim(worker=f"pools-{idx}")
        lat.append(time.perf_counter() - t0)
        if task is None:
            break
        if task.pool == SLOW_POOL:
            time.sleep(SLOW_HOLD)
            t0 = time.perf_counter()
            tq.complete(task)
            released.append(time.perf_counter() - t0)
            continue
        tq.complete(task)
        n += 1
        counter.value = n
    tq.close()
    return {"count": n, "lat": lat, "released": released}


def measure(dsn: str, rows: int, pooled: bool, seconds: float) -> dict[str, Any]:
    seed(dsn, rows, pooled)
    label = "pools" if pooled else "no pools"
    elapsed, res, count = common.run_clients(
        _client, CLIENTS, {"dsn": dsn}, label=f"{label} x{CLIENTS}", total=seconds, seconds=seconds
    )
    lat = [x for r in res for x in r["lat"]]
    # first and last tenth of the claims: does the cost drift as free tasks are used up?
    per_client_first = [x for r in res for x in r["lat"][: max(1, len(r["lat"]) // 10)]]
    per_client_last = [x for r in res for x in r["lat"][-max(1, len(r["lat"]) // 10) :]]
    over = common.scalar(
        dsn, SCHEMA, OVER_LIMIT
    )
    return {
        "claims": count,
        "seconds": elapsed,
        "per_second": count / elapsed,
        "latency": common.latency_summary(lat),
        "latency_first_tenth": common.latency_summary(per_client_first),
        "latency_last_tenth": common.latency_summary(per_client_last),
        "pools_over_limit": over,
    }


BIG_SCHEMA = "bench_pools_big"
SLOW_SCHEMA = "bench_pools_slow"
SLOW_POOL = "slow"
SLOW_HOLD = 2.0  # seconds a consumer holds a task of the slow pool
SLOW_ROWS = 20_000  # the slow pool's backlog, queued ahead of ten times as many other tasks
SEED_SLOW = """
INSERT INTO tasks (queue, payload, priority, required, pool, state, max_attempts)
SELECT 'default', '{{}}'::jsonb, 0, {required}, CASE WHEN g <= %(slow)s THEN 'slow' END, 'queued', 3
  FROM generate_series(1, %(slow)s * 11) g
"""
#: The slow pool's sizes (every claim takes any size: the consumers give no
#: ``available``). A release puts back the staircase of running minima of
#: ``required`` (unpark_behind): one task when all are equal, about ln n in
#: random order, and every one when the size falls as id grows, the
#: adversarial case, where a release costs what it did before migration 0045.
SLOW_SIZES = {"equal": "0", "random": "(g * 7919) %% 1000", "falling": "%(slow)s * 11 - g"}
BIG_ROWS = 100_000
SEED_BIG = """
INSERT INTO tasks (queue, payload, priority, required, pool, state, max_attempts)
SELECT 'default', '{}'::jsonb, 0, 0,
       CASE WHEN %(pooled)s AND (CASE WHEN %(head)s THEN g <= %(rows)s / 2 ELSE g %% 2 = 0 END) THEN 'big' END,
       'queued', 3
  FROM generate_series(1, %(rows)s) g
"""
NAIVE_CLAIM = """
SELECT t.id, t.pool FROM tasks t
 WHERE t.state = 'queued'
   AND (t.pool IS NULL OR NOT EXISTS (SELECT 1 FROM pools p WHERE p.name = t.pool AND p.running >= p.running_limit))
 ORDER BY t.priority, t.id FOR UPDATE SKIP LOCKED LIMIT 1
"""


def seed_big(dsn: str, rows: int, pooled: bool, naive: bool, layout: str) -> None:
    common.fresh_queue(dsn, BIG_SCHEMA).close()
    statements: list[Any] = ["INSERT INTO pools (name, running_limit, running) VALUES ('big', 2, 0)",
                             (SEED_BIG, {"rows": rows, "pooled": pooled, "head": layout == "head"})]
    if naive:
        statements.append("CREATE INDEX bench_naive ON tasks (priority, id) WHERE state = 'queued'")
    common.execute(dsn, BIG_SCHEMA, *statements, "VACUUM ANALYZE tasks", "VACUUM ANALYZE pools")


def _naive_big(idx: int, args: dict[str, Any], counter: Any, sync: Any) -> dict[str, Any]:
    from .shapes import connect

    conn = connect(args)
    stop = common.ready(counter, sync)
    n = 0
    released: list[float] = []
    while not stop.is_set():
        row = conn.execute(NAIVE_CLAIM).fetchone()
        if row is None:
            conn.rollback()
            break
        task_id, pool = row
        if pool is not None and conn.execute(
            "UPDATE pools SET running = running + 1 WHERE name = %s AND running < running_limit RETURNING 1", (pool,)
        ).fetchone() is None:
            conn.rollback()  # full since the look: another claim took the slot
            continue
        conn.execute("UPDATE tasks SET state = 'running', attempts = attempts + 1, worker = 'naive',"
                     " started_at = now(), lease_token = gen_random_uuid(),"
                     " lease_expires_at = now() + interval '60 seconds' WHERE id = %s", (task_id,))
        conn.commit()
        if pool == SLOW_POOL:
            time.sleep(SLOW_HOLD)
        t0 = time.perf_counter()
        conn.execute("UPDATE tasks SET state = 'done', lease_token = NULL, lease_expires_at = NULL, finished_at = now()"
                     " WHERE id = %s", (task_id,))
        if pool is not None:
            conn.execute("UPDATE pools SET running = running - 1 WHERE name = %s", (pool,))
        conn.commit()
        if pool == SLOW_POOL:
            released.append(time.perf_counter() - t0)
            continue
        n += 1
        counter.value = n
    conn.close()
    return {"count": n, "released": released}


def measure_big(dsn: str, rows: int, seconds: float, layout: str = "interleaved") -> dict[str, Any]:
    """One pool of limit 2 holding half the tasks: ours, the naive loop, and ours with no pools."""
    out: dict[str, Any] = {"rows": rows, "limit": 2, "pooled_share": 0.5, "clients": CLIENTS, "layout": layout}
    for label, fn, pooled, naive in (("ours", _client, True, False), ("naive", _naive_big, True, True),
                                     ("ours_no_pools", _client, False, False)):
        seed_big(dsn, rows, pooled, naive, layout)
        elapsed, _, count = common.run_clients(fn, CLIENTS, {"dsn": dsn, "schema": BIG_SCHEMA},
                                               label=f"big pool ({layout}): {label} x{CLIENTS}", total=seconds,
                                               seconds=seconds)
        out[label] = {"claims": count, "seconds": elapsed, "per_second": count / elapsed}
        out[label]["over_limit"] = common.scalar(
            dsn, BIG_SCHEMA, OVER_LIMIT)
    common.drop_schema(dsn, BIG_SCHEMA)
    out["ours_vs_naive"] = common.ratio(out["ours"]["per_second"], out["naive"]["per_second"])
    out["ours_vs_no_pools"] = common.ratio(out["ours"]["per_second"], out["ours_no_pools"]["per_second"])
    return out


def measure_slow(dsn: str, slow_rows: int, seconds: float, sizes: str = "equal") -> dict[str, Any]:
    """The slow pool (``--only slow``, ``slow_random``, ``slow_falling``): ours, then the naive loop, on fresh rows."""
    out: dict[str, Any] = {"slow_rows": slow_rows, "other_rows": slow_rows * 10, "limit": 1, "hold_s": SLOW_HOLD,
                           "clients": CLIENTS, "sizes": sizes}
    for label, fn, naive in (("ours", _client, False), ("naive", _naive_big, True)):
        common.fresh_queue(dsn, SLOW_SCHEMA).close()
        statements: list[Any] = ["INSERT INTO pools (name, running_limit, running) VALUES ('slow', 1, 0)",
                                 (SEED_SLOW.format(required=SLOW_SIZES[sizes]), {"slow": slow_rows})]
        if naive:
            statements.append("CREATE INDEX bench_naive ON tasks (priority, id) WHERE state = 'queued'")
        common.execute(dsn, SLOW_SCHEMA, *statements, "VACUUM ANALYZE tasks", "VACUUM ANALYZE pools")
        elapsed, res, count = common.run_clients(fn, CLIENTS, {"dsn": dsn, "schema": SLOW_SCHEMA},
                                                 label=f"slow pool: {label} x{CLIENTS}", total=seconds,
                                                 seconds=seconds)
        released = [x for r in res for x in r["released"]]
        out[label] = {"other_claims": count, "seconds": elapsed, "other_per_second": count / elapsed,
                      "releases": len(released), "release": common.latency_summary(released),
                      "over_limit": common.scalar(dsn, SLOW_SCHEMA, OVER_LIMIT)}
    common.drop_schema(dsn, SLOW_SCHEMA)
    out["ours_vs_naive"] = common.ratio(out["ours"]["other_per_second"], out["naive"]["other_per_second"])
    return out


def run(opts: common.Options) -> dict[str, Any]:
    rows = opts.rows or DEFAULT_ROWS
    seconds = opts.seconds or 10.0
    if opts.only == "big":
        return {"scenario": "pools", "big_pool": measure_big(opts.dsn, opts.rows or BIG_ROWS, seconds)}
    if opts.only in ("slow", "slow_random", "slow_falling"):
        sizes = "equal" if opts.only == "slow" else opts.only.removeprefix("slow_")
        return {"scenario": "pools",
                f"{opts.only}_pool": measure_slow(opts.dsn, opts.rows or SLOW_ROWS, opts.seconds or 20.0, sizes)}
    if opts.only == "big_head":
        return {"scenario": "pools", "big_pool_head": measure_big(opts.dsn, opts.rows or BIG_ROWS, seconds, "head")}
    with_pools = measure(opts.dsn, rows, True, seconds)
    without = measure(opts.dsn, rows, False, seconds)
    r = common.ratio(with_pools["per_second"], without["per_second"])
    if opts.only == "many":
        common.drop_schema(opts.dsn, SCHEMA)
        return {"scenario": "pools", "rows": rows, "pools": POOLS, "full_share": FULL_SHARE, "clients": CLIENTS,
                "with_pools": with_pools, "without_pools": without, "ratio_pools_vs_none": r}
    limit = common.physical_limit(opts.dsn, CLIENTS)
    common.drop_schema(opts.dsn, SCHEMA)
    return {
        "scenario": "pools",
        "rows": rows,
        "pools": POOLS,
        "full_share": FULL_SHARE,
        "clients": CLIENTS,
        "with_pools": with_pools,
        "without_pools": without,
        "ratio_pools_vs_none": r,
        "limit": limit,
        "with_pools_vs_limit": common.ratio(with_pools["per_second"], limit["per_second"]),
        "without_pools_vs_limit": common.ratio(without["per_second"], limit["per_second"]),
        "targets": {"pools_ratio_ge_0_5": r >= 0.5},
        "big_pool": measure_big(opts.dsn, BIG_ROWS if opts.rows is None else max(1, opts.rows // 2), seconds),
        "big_pool_head": measure_big(opts.dsn, BIG_ROWS if opts.rows is None else max(1, opts.rows // 2), seconds,
                                     "head"),
        "slow_pool": measure_slow(opts.dsn, SLOW_ROWS if opts.rows is None else max(1, opts.rows // 10), 20.0),
    }
