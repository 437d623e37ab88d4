"""Is the claim + complete loop's client CPU the API's, or any client's under 8 processes? (issue #9)

``bench cpu_split`` found ours' client CPU a task growing from 1 to 8
consumers where the naive client's did not. This scenario runs three client
loops over the same claim function, one after another on ``epoch_rising_max``
(``--rows``, default 200,000, put back between loops), with 1 and with 8
processes, and reports tasks/s and each process's CPU a task on the clock:

- ``api``: ``TaskQueue.claim`` + ``complete``, as ``bench shapes`` runs ours;
- ``bare_task``: the same two statements through bare psycopg (prepared),
  fetching the 22 columns a ``Task`` is built from;
- ``bare_id``: the same, fetching the id and the lease token only.

The server does the same work in all three; only the client differs.

``python -m bench client_loops [--rows N] [--seconds S]``
"""

from __future__ import annotations

import time
from typing import Any

import psycopg

from . import common, shapes
from .shape_catalog import SHAPES

SCHEMA = "bench_client_loops"
SHAPE = "epoch_rising_max"
LOOPS = ("api", "bare_task", "bare_id")
TASK_COLUMNS = ("id, queue, payload, priority, required, pool, state, attempts, max_attempts, run_at, created_at, "
                "worker, lease_expires_at, result, error, dedupe_key, started_at, finished_at, cancel_requested, "
                "lease_seconds, estimate, lease_token::text")
CLAIM = "SELECT {columns} FROM claim_tasks(%s::bigint, 1, NULL::text[], 'bare', 60::float8, %s, false)"
COMPLETE = """UPDATE tasks SET state = 'done', result = NULL, finished_at = now(), lease_token = NULL,
       lease_expires_at = NULL
 WHERE id = %s AND lease_token = %s::uuid AND pool IS NULL RETURNING id, state, run_at"""


def loop_client(idx: int, args: dict[str, Any], counter: Any, sync: Any) -> dict[str, Any]:
    shape, kind = args["shape"], args["loop"]
    available, descending = shape.available, shape.order == "max"
    if kind == "api":
        from taskqueue import TaskQueue

        tq = TaskQueue(args["dsn"], schema=args["schema"])
        tq.peek(available=1)
        stop = common.ready(counter, sync)
        n = common.claim_complete_loop(tq, stop, counter, available=available, worker=f"api-{idx}",
                                       order=shape.order)
        tq.close()
    else:
        claim = CLAIM.format(columns=TASK_COLUMNS if kind == "bare_task" else "id, lease_token::text")
        with psycopg.connect(args["dsn"], autocommit=True) as conn:
            conn.execute("SELECT set_config('search_path', %s, false)", (f'"{args["schema"]}"',))
            stop = common.ready(counter, sync)
            n = 0
            while not stop.is_set():
                row = conn.execute(claim, (available, descending), prepare=True).fetchone()
                if row is None:
                    break
                conn.execute(COMPLETE, (row[0], row[-1]), prepare=True).fetchone()
                n += 1
                counter.value = n
    assert common.started_cpu is not None
    return {"count": n, "cpu_s": time.process_time() - common.started_cpu}


def run(opts: common.Options) -> dict[str, Any]:
    rows = opts.rows or 200_000
    seconds = opts.seconds or 4.0
    shape = next(s for s in SHAPES if s.name == SHAPE)
    shapes.seed(opts.dsn, SCHEMA, shape, rows)
    out: dict[str, Any] = {}
    try:
        for clients in (1, shapes.CLIENTS):
            for kind in LOOPS:
                args = {"dsn": opts.dsn, "schema": SCHEMA, "shape": shape, "loop": kind}
                elapsed, results, count = common.run_clients(
                    loop_client, clients, args, label=f"{kind} x{clients}", total=seconds, seconds=seconds)
                shapes.reset(opts.dsn, SCHEMA)
                cpu = sum(r["cpu_s"] for r in results)
                out[f"{kind}_x{clients}"] = {"per_s": count / elapsed if elapsed else 0.0, "tasks": count,
                                             "client_us": 1e6 * cpu / count if count else None}
    finally:
        common.drop_schema(opts.dsn, SCHEMA)
    return {"scenario": "client_loops", "shape": SHAPE, "rows": rows, "seconds_per_loop": seconds, "loops": out}
