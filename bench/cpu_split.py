"""Where a claim's CPU goes: ours against the naive query, 1 and 8 consumers (issue #9).

With 8 consumers on two cores both sides are bound by CPU, so a shape's x8
ratio is the ratio of what a claim + complete costs in CPU, wherever it is
spent. For each chosen shape of ``bench shapes`` (seeded at ``--rows``,
default 1,000,000), the naive query and ours run as ``bench shapes`` runs
them (the same clients, the rows put back between phases, the naive query
on its own index), in interleaved rounds, and each phase reports per task
taken:

- ``client_us``: the client processes' CPU on the clock, each read in the
  process from the start to its end (not its imports or connecting);
- ``server_us``: the rest of the machine's busy CPU in the same window
  (Linux's /proc/stat, all CPUs): PostgreSQL's backends, WAL writer and
  checkpointer, less the benchmark's own parent process. None where
  /proc/stat is missing, and wrong if anything else runs, so run nothing
  else (the server must be on this machine).

``python -m bench cpu_split [--only SHAPES] [--rows N] [--seconds S]``
"""

from __future__ import annotations

import contextlib
import statistics
import time
from typing import Any

from . import common, shapes
from .shape_catalog import Shape, chosen

SCHEMA = "bench_cpu_split"
#: The dense shapes whose 8-consumer ratio was below 0.8x in the run of record on claim_tasks v41.
DEFAULT = ("epoch_rising_max", "listed_mb_half_max", "bytes_dense_max", "mb_half_max_pools",
           "deadlines_mb_uniform", "shuffled_rising_max", "listed_half_max")
CLIENT_COUNTS = (1, shapes.CLIENTS)
ROUNDS = 2


def _on_the_clock(fn: common.ClientFn) -> common.ClientFn:
    """A client that also reports its own CPU seconds from the start of the clock to its end."""

    def client(idx: int, args: dict[str, Any], counter: Any, sync: Any) -> dict[str, Any]:
        result = fn(idx, args, counter, sync)
        started = common.started_cpu
        result["cpu_s"] = None if started is None else time.process_time() - started
        result.pop("lat", None)
        return result

    return client


# Module level, so that forked clients find them by name like any other client.
timed_naive = _on_the_clock(shapes.naive_client)
timed_ours = _on_the_clock(shapes.ours_client)


def _phase(shape: Shape, side: str, clients: int, args: dict[str, Any], seconds: float) -> dict[str, Any]:
    marks: dict[str, Any] = {}
    naive = side == "naive"
    with shapes.naive_index(args["dsn"], SCHEMA, shape) if naive else contextlib.nullcontext():
        elapsed, results, count = common.run_clients(
            timed_naive if naive else timed_ours, clients, args,
            label=f"{shape.name} {side} x{clients}", total=seconds, seconds=seconds, marks=marks)
    shapes.reset(args["dsn"], SCHEMA)
    client_s = sum(r["cpu_s"] or 0.0 for r in results)
    (busy0, own0), (busy1, own1) = marks["go"], marks["end"]
    server_s = None if busy0 is None or busy1 is None else (busy1 - busy0) - client_s - (own1 - own0)
    return {
        "per_s": count / elapsed if elapsed else 0.0,
        "tasks": count,
        "client_us": 1e6 * client_s / count if count else None,
        "server_us": 1e6 * server_s / count if count and server_s is not None else None,
    }


def _median(values: list[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return statistics.median(known) if known else None


def measure(dsn: str, shape: Shape, rows: int, seconds: float) -> dict[str, Any]:
    common.console.log(f"cpu_split: {shape.name}: seeding {rows:,} rows")
    shapes.seed(dsn, SCHEMA, shape, rows)
    args = {"dsn": dsn, "schema": SCHEMA, "shape": shape, "cap": max(1, rows // 4 // shapes.CLIENTS)}
    out: dict[str, Any] = {"shape": shape.name, "what": shape.what, "rows": rows}
    for clients in CLIENT_COUNTS:
        phases: dict[str, list[dict[str, Any]]] = {"naive": [], "ours": []}
        for r in range(ROUNDS):
            for side in ("naive", "ours") if r % 2 == 0 else ("ours", "naive"):
                phases[side].append(_phase(shape, side, clients, args, seconds))
        cell: dict[str, Any] = {"rounds": phases}
        for side, got in phases.items():
            cell[side] = {key: _median([p[key] for p in got]) for key in ("per_s", "client_us", "server_us")}
        naive, ours = cell["naive"], cell["ours"]
        cell["ratio"] = common.ratio(ours["per_s"], naive["per_s"])
        cell["server_ratio"] = (ours["server_us"] / naive["server_us"]
                                if ours["server_us"] and naive["server_us"] else None)
        cell["client_ratio"] = (ours["client_us"] / naive["client_us"]
                                if ours["client_us"] and naive["client_us"] else None)
        out[f"x{clients}"] = cell
    return out


def run(opts: common.Options) -> dict[str, Any]:
    rows = opts.rows or shapes.DEFAULT_ROWS
    seconds = opts.seconds or 5.0
    wanted = chosen(opts.only, DEFAULT, "cpu_split")
    try:
        results = [measure(opts.dsn, shape, rows, seconds) for shape in wanted]
    finally:
        common.drop_schema(opts.dsn, SCHEMA)
    return {"scenario": "cpu_split", "rows": rows, "seconds_per_phase": seconds, "rounds": ROUNDS,
            "shapes": results}
