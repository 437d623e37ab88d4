"""Claims and completions when the statistics were taken on a quiet queue: ``python -m bench stale``.

A queue is often analyzed while it is nearly empty (a quiet night, a new
queue), then fills with a burst before the next ANALYZE. The partial indexes
then look empty to the planner. This scenario builds the same backlog twice,
one schema analyzed after the burst (**fresh**) and one analyzed before it
(**stale**), both with autovacuum off so the statistics stay as built, and
5,000 tasks left running in each (a fleet's claims in flight). Then, in
interleaved rounds, one consumer loops:

- ``claim(order="max")`` + ``complete()``: the descending claim, whose takes go
  by id through take_task;
- ``claim_many(limit=100)`` + ``complete_many()``;
- ``claim()`` + ``complete()``, ascending.

The result is stale / fresh per loop kind: 1.0 means the statistics do not
matter. ``--old`` loads older function files (comma-separated, e.g.
``take_task.v1,park_rows.v1,claim_tasks.v18``) into a third copy, stale
too, to show what they cost there. Only the claim functions are versioned;
the completion statements are the current ones in every copy.
"""

from __future__ import annotations

import statistics
from typing import Any

from . import common, shape_catalog, shapes, versions

FRESH, STALE, OLD = "bench_stale_fresh", "bench_stale_stale", "bench_stale_old"
DEFAULT_ROWS = 200_000
RUNNING = 5_000
ROUNDS = 3
SECONDS = 4.0
SHAPE = next(s for s in shape_catalog.SHAPES if s.name == "mb_half_max")  # priorities 0..9, sizes 1..1M, half fit
KINDS = ("max", "many", "min")
AVAILABLE = 500_000  # half the shape's tasks fit a single claim

QUIET = ("INSERT INTO tasks (queue, payload, priority, required, state, max_attempts, finished_at) "
         "SELECT 'default', '{}'::jsonb, 0, 1, 'done', 3, now() FROM generate_series(1, 1000)")
RUNNING_SQL = ("INSERT INTO tasks (queue, payload, priority, required, state, max_attempts, attempts, worker, "
               "started_at, lease_token, lease_seconds, lease_expires_at) "
               "SELECT 'default', '{}'::jsonb, 0, 1, 'running', 3, 1, 'elsewhere', now(), gen_random_uuid(), "
               "86400, now() + interval '1 day' FROM generate_series(1, %s)")
RESET = shape_catalog.RESET.replace("WHERE state <> 'queued' OR parked", "WHERE (state <> 'queued' OR parked) "
                             "AND worker IS DISTINCT FROM 'elsewhere'")


def build(dsn: str, schema: str, rows: int, stale: bool) -> None:
    common.fresh_queue(dsn, schema).close()
    sql = shape_catalog.SEED.format(priority=SHAPE.priority, required=SHAPE.required, npools=shape_catalog.POOLS, queues=1)
    steps: list[str | tuple[str, Any]] = ["ALTER TABLE tasks SET (autovacuum_enabled = false)", QUIET]
    if stale:
        steps.append("VACUUM ANALYZE tasks")
    steps += [(sql, {"n": rows, "pools": False}), (RUNNING_SQL, (RUNNING,))]
    if not stale:
        steps.append("VACUUM ANALYZE tasks")
    common.execute(dsn, schema, *steps)


def reset(dsn: str, schema: str) -> None:
    """Put back what the loop claimed, without a VACUUM ANALYZE: that would refresh the statistics."""
    common.execute(dsn, schema, RESET, "CHECKPOINT")


def _client(idx: int, args: dict[str, Any], counter: Any, sync: Any) -> dict[str, Any]:
    from taskqueue import TaskQueue

    kind = args["kind"]
    tq = TaskQueue(args["dsn"], schema=args["schema"], pool_size=1, max_overflow=0)
    tq.peek(available=1)
    stop = common.ready(counter, sync)
    if kind == "many":  # room for 100 of any size
        n = common.claim_complete_loop(tq, stop, counter, limit=100, cap=args["cap"], available=AVAILABLE * 100,
                                       worker="stale")
    else:
        n = common.claim_complete_loop(tq, stop, counter, cap=args["cap"], available=AVAILABLE, worker="stale",
                                       order=kind)
    tq.close()
    return {"count": n}


def run(opts: common.Options) -> dict[str, Any]:
    rows = opts.rows or DEFAULT_ROWS
    seconds = opts.seconds or SECONDS
    schemas = [FRESH, STALE]
    common.console.log(f"stale: building {rows:,} queued and {RUNNING:,} running tasks, fresh and stale")
    build(opts.dsn, FRESH, rows, stale=False)
    build(opts.dsn, STALE, rows, stale=True)
    if opts.old:
        build(opts.dsn, OLD, rows, stale=True)
        for name in opts.old.split(","):
            versions.load_old(opts.dsn, OLD, name.strip())
        schemas.append(OLD)
    cap = max(1, rows // 4)
    per_s: dict[str, dict[str, list[float]]] = {k: {s: [] for s in schemas} for k in KINDS}
    for r in range(ROUNDS):
        for kind in KINDS:
            order = schemas if r % 2 == 0 else list(reversed(schemas))
            for schema in order:
                args = {"dsn": opts.dsn, "schema": schema, "kind": kind, "cap": cap}
                rate, _ = shapes.phase(_client, 1, args, f"{schema} {kind} round {r + 1}", seconds)
                per_s[kind][schema].append(rate)
                reset(opts.dsn, schema)
    result: dict[str, Any] = {"scenario": "stale", "rows": rows, "running": RUNNING, "rounds": ROUNDS,
                              "seconds": seconds, "shape": SHAPE.name, "old": opts.old, "per_second": per_s,
                              "stale_over_fresh": {}, "old_over_fresh": {}}
    for kind in KINDS:
        fresh = statistics.median(per_s[kind][FRESH])
        result["stale_over_fresh"][kind] = common.ratio(statistics.median(per_s[kind][STALE]), fresh)
        if opts.old:
            result["old_over_fresh"][kind] = common.ratio(statistics.median(per_s[kind][OLD]), fresh)
    for schema in schemas:
        common.drop_schema(opts.dsn, schema)
    return result
