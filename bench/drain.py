"""Target 3: drain N no-op tasks with two worker processes, against the peers, in one run.

Ours is measured twice: the project's ``Worker`` as a user runs it (one
transaction per completion), and a batch loop over ``claim_many`` and
``complete_many`` (one transaction per batch each way). Peers: PGQueuer's
QueueManager in drain mode at several batch sizes (its best counts) and
procrastinate's worker with wait=False.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from . import common, peers

PROCESSES = 2
DEFAULT_ROWS = 20_000
SCHEMA = "bench_drain"
BATCH = 500


def seed(dsn: str, n: int) -> None:
    tq = common.fresh_queue(dsn, SCHEMA)
    done = 0
    while done < n:
        k = min(10_000, n - done)
        tq.enqueue_many([{"payload": None}] * k)
        done += k
    tq.close()
    common.execute(dsn, SCHEMA, "VACUUM ANALYZE tasks")


def _loop_client(idx: int, args: dict[str, Any], counter: Any, sync: Any) -> dict[str, Any]:
    from taskqueue import TaskQueue

    tq = TaskQueue(args["dsn"], schema=SCHEMA, pool_size=1, max_overflow=0)
    tq.peek()
    stop = common.ready(counter, sync)
    n = 0
    while not stop.is_set():
        tasks = tq.claim_many(limit=args["batch"], worker=f"loop-{idx}")
        if not tasks:
            break
        lost = tq.complete_many([(t, None) for t in tasks])
        n += len(tasks) - len(lost)
        counter.value = n
    tq.close()
    return {"count": n}


def _worker_client(idx: int, args: dict[str, Any], counter: Any, sync: Any) -> dict[str, Any]:
    import logging

    from taskqueue import TaskQueue
    from taskqueue.worker import Worker

    logging.getLogger("taskqueue").setLevel(logging.WARNING)
    tq = TaskQueue(args["dsn"], schema=SCHEMA, pool_size=4, max_overflow=20)
    tq.peek()
    worker = Worker(queues=["default"], concurrency=args["concurrency"], name=f"drain-{idx}", maintenance=False,
                    capacity=args.get("capacity"), policy=args.get("policy", "backfill"))
    n = 0
    lock = threading.Lock()

    @worker.handler("default")
    def noop(task: Any) -> None:
        nonlocal n
        with lock:
            n += 1
            counter.value = n

    def watch() -> None:
        # Drain mode: stop once nothing is waiting or running.
        while True:
            time.sleep(0.05)
            left = tq.stats().by_state
            if left["queued"] == 0 and left["running"] == 0 and left["scheduled"] == 0:
                worker.stop()
                return

    common.ready(counter, sync)
    threading.Thread(target=watch, daemon=True).start()
    worker.run(tq)
    tq.close()
    return {"count": n}


def ours(dsn: str, n: int, fn: Any, label: str, **args: Any) -> dict[str, Any]:
    seed(dsn, n)
    elapsed, _, _ = common.run_clients(fn, PROCESSES, {"dsn": dsn, **args}, label=label, total=n)
    done = int(common.scalar(dsn, SCHEMA, "SELECT count(*) FROM tasks WHERE state = 'done'"))
    return {"jobs": done, "seconds": elapsed, "per_second": done / elapsed, **args}


def run(opts: common.Options) -> dict[str, Any]:
    n = opts.rows or DEFAULT_ROWS
    dsn = opts.dsn
    result: dict[str, Any] = {"scenario": "drain", "rows": n, "processes": PROCESSES, "peers": peers.available()}
    result["ours_batch_loop"] = ours(dsn, n, _loop_client, f"ours claim_many/complete_many b{BATCH}", batch=BATCH)
    result["ours_worker"] = ours(dsn, n, _worker_client, "ours Worker", concurrency=50)
    common.drop_schema(dsn, SCHEMA)
    if result["peers"]["pgqueuer"]:
        pdsn = peers.pgq_dsn(dsn)
        runs = [peers.pgq_drain(pdsn, n, PROCESSES, b) for b in (10, 100, 500)]
        result["pgqueuer_runs"] = runs
        result["pgqueuer_best"] = max(runs, key=lambda r: r["per_second"])
    if result["peers"]["procrastinate"]:
        result["procrastinate"] = peers.proc_drain(peers.proc_dsn(dsn), n, PROCESSES)
    limit = common.physical_limit(dsn, PROCESSES)
    result["limit"] = limit
    best_ours = max(result["ours_batch_loop"]["per_second"], result["ours_worker"]["per_second"])
    ratios = {"ours_batch_loop_vs_limit": common.ratio(result["ours_batch_loop"]["per_second"], limit["per_second"]),
              "ours_worker_vs_limit": common.ratio(result["ours_worker"]["per_second"], limit["per_second"])}
    targets = {}
    if "pgqueuer_best" in result:
        pg = result["pgqueuer_best"]["per_second"]
        ratios["ours_batch_loop_vs_pgqueuer"] = common.ratio(result["ours_batch_loop"]["per_second"], pg)
        ratios["ours_worker_vs_pgqueuer"] = common.ratio(result["ours_worker"]["per_second"], pg)
        ratios["pgqueuer_vs_limit"] = common.ratio(pg, limit["per_second"])
        targets["ge_1x_pgqueuer"] = best_ours >= pg
    if "procrastinate" in result:
        pr = result["procrastinate"]["per_second"]
        ratios["ours_batch_loop_vs_procrastinate"] = common.ratio(result["ours_batch_loop"]["per_second"], pr)
        ratios["ours_worker_vs_procrastinate"] = common.ratio(result["ours_worker"]["per_second"], pr)
        ratios["procrastinate_vs_limit"] = common.ratio(pr, limit["per_second"])
        targets["ge_10x_procrastinate"] = best_ours >= 10 * pr
    result["ratios"] = ratios
    result["targets"] = targets
    return result
