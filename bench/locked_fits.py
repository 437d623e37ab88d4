"""Fits held locked by another transaction: an empty claim against the naive query (issue #9, found, not fixed).

A long transaction that locks many queued rows (an operator's ``SELECT ...
FOR UPDATE``) leaves every claim to pass them. The setup: 10 fits in a full
pool (limit 0), ``--rows`` fits with no pool (default 20,000) held ``FOR
UPDATE`` by another open transaction, and 50,000 tasks too big. Then, with
that transaction open, ``claim(available=4)`` and the naive ``SKIP LOCKED``
query over ``ix_tasks_claim`` are each timed ``CLAIMS`` times, the full
pool's rows put back before each of ours (so that every claim passes them
and parks them, migration 0046's bulk read included). Both find nothing.

``python -m bench locked_fits [--rows N]``
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
NAIVE = """
SELECT id FROM tasks t
 WHERE state = 'queued' AND queue = 'default' AND required <= 4
   AND NOT EXISTS (SELECT 1 FROM pools p WHERE p.name = t.pool AND p.running_limit IS NOT NULL
                                           AND p.running >= p.running_limit)
 ORDER BY priority, id FOR UPDATE SKIP LOCKED LIMIT 1
"""


def run(opts: common.Options) -> dict[str, Any]:
    rows = opts.rows or DEFAULT_ROWS
    tq = common.fresh_queue(opts.dsn, SCHEMA)
    tq.set_pool_limit("full", 0)
    full = tq.enqueue_many([{"payload": i, "pool": "full", "priority": i, "required": 1} for i in range(10)])
    locked = tq.enqueue_many([{"payload": i, "priority": 100 + i, "required": 1 + i % 4} for i in range(rows)])
    tq.enqueue_many([{"payload": i, "priority": 100 + rows + i, "required": 50} for i in range(TOO_BIG)])
    common.execute(opts.dsn, SCHEMA, "VACUUM ANALYZE tasks")
    ours: list[float] = []
    naive: list[float] = []
    with psycopg.connect(opts.dsn) as holder, psycopg.connect(opts.dsn, autocommit=True) as conn:
        for c in (holder, conn):
            c.execute(f'SET search_path = "{SCHEMA}"')
        holder.execute("SELECT id FROM tasks WHERE id = ANY (%s) FOR UPDATE", (locked,))
        with common.progress() as bar:
            progress = bar.add_task("locked fits: ours and naive, turn by turn", total=CLAIMS)
            for _ in range(CLAIMS):
                conn.execute("UPDATE tasks SET parked = false WHERE id = ANY (%s)", (full,))
                t0 = time.perf_counter()
                got = tq.claim(available=4)
                ours.append((time.perf_counter() - t0) * 1000)
                if got is not None:
                    raise RuntimeError(f"a claim took {got!r} where every fit is locked or in a full pool")
                with conn.transaction():
                    t0 = time.perf_counter()
                    found = conn.execute(NAIVE).fetchone()
                    naive.append((time.perf_counter() - t0) * 1000)
                    if found is not None:
                        raise RuntimeError(f"the naive query found {found}")
                bar.advance(progress)
        holder.rollback()
    tq.close()
    common.drop_schema(opts.dsn, SCHEMA)
    return {
        "scenario": "locked_fits", "locked_fits": rows, "full_pool_fits": len(full), "too_big": TOO_BIG,
        "ours_ms": ours, "naive_ms": naive,
        "ours_median_ms": statistics.median(ours), "naive_median_ms": statistics.median(naive),
        "ours_vs_naive_time": statistics.median(ours) / statistics.median(naive),
    }
