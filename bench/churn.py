"""Target 6: churn without decay.

Push N tasks through enqueue_many / claim_many / complete_many with a bounded
backlog, pruning finished rows and vacuuming every 5k tasks as a maintenance
loop would, and compare the
claim latency of the first and the last 5% of the run. Table and index sizes
are taken before and after.
"""

from __future__ import annotations

import time
from typing import Any

from . import common

DEFAULT_ROWS = 2_000_000
SCHEMA = "bench_churn"
ENQUEUE_BATCH = 1_000
CLAIM_BATCH = 100
BACKLOG = 10_000
PRUNE_EVERY = 5_000


def run(opts: common.Options) -> dict[str, Any]:
    n = opts.rows or DEFAULT_ROWS
    dsn = opts.dsn
    tq = common.fresh_queue(dsn, SCHEMA)
    specs = [{"payload": None}] * ENQUEUE_BATCH
    # a standing backlog, so claims always run against BACKLOG waiting tasks
    for _ in range(BACKLOG // ENQUEUE_BATCH):
        tq.enqueue_many(specs)
    common.execute(dsn, SCHEMA, "VACUUM ANALYZE tasks")
    before = common.relation_sizes(dsn, SCHEMA)
    lat: list[float] = []
    done = 0
    pruned = 0
    since_prune = 0
    t_start = time.perf_counter()
    with common.progress() as bar:
        task = bar.add_task("churn", total=n)
        while done < n:
            tq.enqueue_many(specs)
            got = 0
            while got < ENQUEUE_BATCH:
                t0 = time.perf_counter()
                tasks = tq.claim_many(limit=CLAIM_BATCH, worker="churn")
                lat.append(time.perf_counter() - t0)
                if not tasks:
                    break
                tq.complete_many([(t, None) for t in tasks])
                got += len(tasks)
            done += got
            since_prune += got
            if since_prune >= PRUNE_EVERY:
                # what a maintenance loop does: delete finished rows, then vacuum
                # so the claim index sheds their entries
                pruned += tq.prune(older_than=0, batch=1_000_000)
                common.execute(dsn, SCHEMA, "VACUUM tasks")
                since_prune = 0
            bar.update(task, completed=done)
    elapsed = time.perf_counter() - t_start
    pruned += tq.prune(older_than=0, batch=1_000_000)
    tq.close()
    after_no_vacuum = common.relation_sizes(dsn, SCHEMA)
    common.execute(dsn, SCHEMA, "VACUUM ANALYZE tasks")
    after = common.relation_sizes(dsn, SCHEMA)
    k = max(1, len(lat) // 20)
    start, end = common.latency_summary(lat[:k]), common.latency_summary(lat[-k:])
    result = {
        "scenario": "churn",
        "rows": n,
        "backlog": BACKLOG,
        "claim_batch": CLAIM_BATCH,
        "seconds": elapsed,
        "tasks_per_second": done / elapsed,
        "pruned": pruned,
        "claim_latency_first_5pct": start,
        "claim_latency_last_5pct": end,
        "p50_growth": common.ratio(end["p50_ms"], start["p50_ms"]),
        "p99_growth": common.ratio(end["p99_ms"], start["p99_ms"]),
        "sizes_before": before,
        "sizes_after_run": after_no_vacuum,
        "sizes_after_vacuum": after,
        "tasks_bytes_growth": common.ratio(after_no_vacuum.get("tasks", 0), before.get("tasks", 1)),
        "targets": {"p50_within_1_5": common.ratio(end["p50_ms"], start["p50_ms"]) <= 1.5},
    }
    common.drop_schema(dsn, SCHEMA)
    return result
