"""A burst of delayed tasks falling due at once: ``python -m bench due_burst``.

Seed 004's workers sleep until work is due; a batch job scheduled for
midnight, or a storm of retries with one backoff, puts many tasks due at the
same moment. The first claims after it promote every due task (so that none
of them can hide a better priority), and this measures what that costs: N
tasks are made due at once, then

- **one claimer**: the first claim's time, with nothing else running;
- **8 claimers** started together: each one's first claim, which share the
  promotion (each skips the rows another holds), and the time until all 8
  have their task.

``--old claim_tasks.v22`` then measures an older claim function the same
way, on the same rows seeded again (one round each, today's first).
"""

from __future__ import annotations

import time
from typing import Any

from . import common, shapes, versions

NEW, OLD = "bench_due_new", "bench_due_old"
DEFAULT_ROWS = 200_000
CLIENTS = 8

SEED = ("INSERT INTO tasks (queue, payload, priority, required, state, max_attempts, run_at) "
        "SELECT 'default', '{}'::jsonb, g %% 10, 1, 'scheduled', 3, now() - interval '1 minute' "
        "FROM generate_series(1, %(n)s) g")


def seed(dsn: str, schema: str, rows: int, old: str | None) -> None:
    common.fresh_queue(dsn, schema).close()
    if old:
        versions.load_old(dsn, schema, old)
    common.execute(dsn, schema, (SEED, {"n": rows}), "VACUUM ANALYZE tasks", "CHECKPOINT")


def _client(idx: int, args: dict[str, Any], counter: Any, sync: Any) -> dict[str, Any]:
    with shapes.connect(args) as conn:
        common.ready(counter, sync)
        t0 = time.perf_counter()
        got = conn.execute("SELECT id FROM claim_tasks(NULL, 1, NULL, %s, 60, false)", (f"burst-{idx}",)).fetchone()
        conn.commit()
        seconds = time.perf_counter() - t0
        counter.value = 1
    return {"count": 1 if got else 0, "seconds": seconds}


def measure(dsn: str, schema: str, rows: int, old: str | None) -> dict[str, Any]:
    seed(dsn, schema, rows, old)
    _, one, _ = common.run_clients(_client, 1, {"dsn": dsn, "schema": schema}, label=f"{schema} x1",
                                   total=1)
    seed(dsn, schema, rows, old)
    _, many, _ = common.run_clients(_client, CLIENTS, {"dsn": dsn, "schema": schema},
                                    label=f"{schema} x{CLIENTS}", total=CLIENTS)
    queued = common.scalar(dsn, schema, "SELECT count(*) FROM tasks WHERE state = 'queued'")
    firsts = sorted(r["seconds"] for r in many)
    return {"one_claimer_seconds": one[0]["seconds"], "eight_first_claims_seconds": firsts,
            "eight_all_seconds": firsts[-1], "queued_after": queued, "claimed": sum(r["count"] for r in many)}


def run(opts: common.Options) -> dict[str, Any]:
    rows = opts.rows or DEFAULT_ROWS
    result: dict[str, Any] = {"scenario": "due_burst", "rows": rows, "clients": CLIENTS, "old": opts.old,
                              "today": measure(opts.dsn, NEW, rows, None)}
    common.drop_schema(opts.dsn, NEW)
    if opts.old:
        result["older"] = measure(opts.dsn, OLD, rows, opts.old)
        common.drop_schema(opts.dsn, OLD)
        result["older_over_today"] = {
            "one_claimer": common.ratio(result["older"]["one_claimer_seconds"], result["today"]["one_claimer_seconds"]),
            "eight_all": common.ratio(result["older"]["eight_all_seconds"], result["today"]["eight_all_seconds"]),
        }
    return result
