"""Fits held locked by another transaction: claims against the naive query (issue #9).

A long transaction that locks many queued rows (an operator's ``SELECT ...
FOR UPDATE``) leaves every claim to pass them. The setup: 10 fits in a full
pool (limit 0), ``--rows`` fits with no pool (default 20,000, each needing
1..4) held ``FOR UPDATE`` by another open transaction, and 50,000 tasks too
big (500), all in queue ``default``, plus 1,000 tasks too big in ``other``;
every task its own priority, the held fits first in claim order. With that
transaction open, each case times ``CLAIMS`` claims of ours and of the naive
``SKIP LOCKED`` query over the same scope, turn by turn, the full pool's
rows put back before each of ours (so every claim passes them and parks
them again, migration 0046's bulk read included):

- ``empty``: available 4, one queue: both find nothing (every fit held).
- ``window``: available 100 (the claim's windows, not its buckets): nothing.
- ``every_queue`` and ``list``: available 4 over every queue, and over
  ``default`` and ``other``: nothing.
- ``one_free``: one more fit, free, after the held ones: both take it
  (rolled back after each).
- ``max``: ``order="max"`` on a mirror of the rows (priorities negated):
  nothing.
- ``gappy`` and ``sparse``: held fits spread among tasks too big instead,
  2,000 of them 100 rows apart and 200 of them 2,000 rows apart (every
  task its own priority, nothing free): a walk past held fits reads those
  piles, which the buckets jump.

``python -m bench locked_fits [--rows N] [--only empty,max,sparse]``
"""

from __future__ import annotations

import statistics
import time
from typing import Any

import psycopg

from . import common

SCHEMA = "bench_locked_fits"
DEFAULT_ROWS = 20_000
TOO_BIG = 50_000
CLAIMS = 7
NOT_FULL = """NOT EXISTS (SELECT 1 FROM pools p WHERE p.name = t.pool AND p.running_limit IS NOT NULL
                                   AND p.running >= p.running_limit)"""
# (available, queues, order, a free fit after the held ones)
CASES: dict[str, tuple[int, list[str] | None, str, bool]] = {
    "empty": (4, ["default"], "min", False),
    "window": (100, ["default"], "min", False),
    "every_queue": (4, None, "min", False),
    "list": (4, ["default", "other"], "min", False),
    "one_free": (4, ["default"], "min", True),
    "max": (4, ["default"], "max", False),
    "gappy": (4, ["default"], "min", False),
    "sparse": (4, ["default"], "min", False),
}


def naive_sql(available: int, queues: list[str] | None, order: str) -> str:
    scope = "" if queues is None else "AND queue = ANY (%(queues)s)"
    direction = "DESC" if order == "max" else ""
    return (f"SELECT id FROM tasks t WHERE state = 'queued' {scope} AND required <= {available} AND {NOT_FULL} "
            f"ORDER BY priority {direction}, id FOR UPDATE SKIP LOCKED LIMIT 1")


def seed(tq: Any, rows: int, sign: int, free: bool) -> tuple[list[int], list[int], list[int]]:
    """Full pool's fits, held fits, the free fit (if any), in claim order for ``sign`` (1 ascending, -1 max)."""
    tq.set_pool_limit("full", 0)
    full = tq.enqueue_many([{"payload": i, "pool": "full", "priority": sign * i, "required": 1} for i in range(10)])
    held = tq.enqueue_many([{"payload": i, "priority": sign * (100 + i), "required": 1 + i % 4} for i in range(rows)])
    tq.enqueue_many([{"payload": i, "priority": sign * (100 + rows + i), "required": 500} for i in range(TOO_BIG)])
    tq.enqueue_many([{"payload": i, "queue": "other", "priority": sign * (100 + i), "required": 500}
                     for i in range(1_000)])
    extra = (tq.enqueue_many([{"payload": "free", "priority": sign * (200 + rows + TOO_BIG), "required": 2}])
             if free else [])
    return full, held, extra


# held fits and the tasks too big after each: gappy and sparse
SPREAD = {"gappy": (2_000, 100), "sparse": (200, 2_000)}


def seed_spread(tq: Any, dsn: str, held: int, gap: int) -> tuple[list[int], list[int], list[int]]:
    """``held`` fits, each followed by ``gap`` tasks too big, every task its own priority; no pool."""
    common.execute(dsn, SCHEMA, (
        "INSERT INTO tasks (queue, payload, priority, required, state, max_attempts) "
        "SELECT 'default', '{}'::jsonb, g, CASE WHEN g %% (%(gap)s + 1) = 0 THEN 1 + g %% 4 ELSE 500 END, "
        "'queued', 3 FROM generate_series(1, %(n)s) g", {"gap": gap, "n": held * (gap + 1)}))
    ids = [r[0] for r in common.rows(dsn, SCHEMA, "SELECT id FROM tasks WHERE required <= 4 ORDER BY priority, id")]
    return [], ids, []


def run_case(opts: common.Options, name: str, rows: int, bar: Any) -> dict[str, Any]:
    available, queues, order, free = CASES[name]
    tq = common.fresh_queue(opts.dsn, SCHEMA)
    if name in SPREAD:
        full, held, extra = seed_spread(tq, opts.dsn, *SPREAD[name])
    else:
        full, held, extra = seed(tq, rows, -1 if order == "max" else 1, free)
    common.execute(opts.dsn, SCHEMA, "VACUUM ANALYZE tasks")
    ours: list[float] = []
    naive: list[float] = []
    sql = naive_sql(available, queues, order)
    progress = bar.add_task(f"locked fits, {name}: ours and naive, turn by turn", total=CLAIMS)
    with psycopg.connect(opts.dsn) as holder, psycopg.connect(opts.dsn, autocommit=True) as conn:
        for c in (holder, conn):
            c.execute(f'SET search_path = "{SCHEMA}"')
        holder.execute("SELECT id FROM tasks WHERE id = ANY (%s) FOR UPDATE", (held,))
        for _ in range(CLAIMS):
            conn.execute("UPDATE tasks SET parked = false WHERE id = ANY (%s)", (full,))
            t0 = time.perf_counter()
            got = tq.claim(available=available, queues=queues, order=order)
            ours.append((time.perf_counter() - t0) * 1000)
            if (got.id if got else None) != (extra[0] if extra else None):
                raise RuntimeError(f"{name}: the claim took {got!r}, not {extra}")
            if got is not None:
                conn.execute("UPDATE tasks SET state = 'queued', attempts = 0, started_at = NULL, worker = NULL, "
                             "lease_token = NULL, lease_seconds = NULL, lease_expires_at = NULL WHERE id = %s",
                             (got.id,))
            with conn.transaction():
                t0 = time.perf_counter()
                found = conn.execute(sql, {"queues": queues}).fetchone()
                naive.append((time.perf_counter() - t0) * 1000)
                if (found[0] if found else None) != (extra[0] if extra else None):
                    raise RuntimeError(f"{name}: the naive query found {found}")
                raise psycopg.Rollback()
            bar.advance(progress)
        holder.rollback()
    tq.close()
    common.drop_schema(opts.dsn, SCHEMA)
    return {
        "available": available, "queues": queues, "order": order, "free_fit": free, "held": len(held),
        "ours_ms": ours, "naive_ms": naive,
        "ours_median_ms": statistics.median(ours), "naive_median_ms": statistics.median(naive),
        "ours_vs_naive_time": statistics.median(ours) / statistics.median(naive),
    }


def run(opts: common.Options) -> dict[str, Any]:
    rows = opts.rows or DEFAULT_ROWS
    only = [s.strip() for s in opts.only.split(",")] if opts.only else list(CASES)
    unknown = sorted(set(only) - set(CASES))
    if unknown:
        raise SystemExit(f"locked_fits: no case {', '.join(unknown)}; the cases are {', '.join(CASES)}")
    with common.progress() as bar:
        cases = {name: run_case(opts, name, rows, bar) for name in only}
    return {"scenario": "locked_fits", "locked_fits": rows, "full_pool_fits": 10, "too_big": TOO_BIG, "cases": cases}
