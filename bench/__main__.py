"""``python -m bench SCENARIO [--json] [--rows N] [--seconds S] [--dsn DSN]``.

Each scenario prints one JSON document on stdout; progress goes to stderr.
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys

from . import common

SCENARIOS = (
    "shapes", "worst_case", "pools", "drain", "enqueue", "limit", "churn", "scheduling", "async_api", "report",
    "versions", "instructions", "stale", "due_burst", "gil_threads", "cpu_neighbour", "random_shapes", "locked_fits",
    "k_walks", "cpu_split", "client_loops", "hot_pool", "write_costs", "client_instructions",
)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument("scenario", choices=SCENARIOS)
    parser.add_argument("--json", action="store_true", help="compact JSON only (default: indented)")
    parser.add_argument("--rows", type=int, default=None, help="scale the workload down (default: the issue's size)")
    parser.add_argument("--seconds", type=float, default=None, help="length of each timed phase")
    parser.add_argument("--dsn", default=common.DEFAULT_DSN, help="libpq DSN (database created if missing)")
    parser.add_argument("--churn-rows", type=int, default=None, help="report only: size of the churn run")
    parser.add_argument("--only", default=None,
                        help="shapes, versions, instructions, k_walks, cpu_split: comma-separated shape names; "
                             "locked_fits: cases; scheduling: drain or real; write_costs: pool_update or "
                             "task_update; "
                             "pools: many, big, big_head, slow, slow_random or slow_falling; "
                             "enqueue: index_cost, level_index_cost, fine_include_cost or any_exact_cost")
    parser.add_argument("--old", default=None,
                        help="versions, instructions: the older function file to compare with, e.g. claim_tasks.v10 "
                             "(versions: several, comma-separated, or an index as it was, e.g. ix_tasks_fit_fine.v1); "
                             "stale: older function files, comma-separated")
    parser.add_argument("--count", type=int, default=None, help="random_shapes: how many shapes to draw (default 30); "
                        "instructions: claims before the counted ones (default 10)")
    parser.add_argument("--seed", type=int, default=None,
                        help="random_shapes: the seed of the draw (default 1); versions: measure shapes of this "
                             "draw, named by --only")
    parser.add_argument("--wide", action="store_true",
                        help="random_shapes: also draw what the plain draw keeps fixed (an amount per claim, "
                             "1,000 queues, a short list of many queues); the plain draw of a seed is unchanged")
    parser.add_argument("--limit", type=int, default=None,
                        help="versions: claim this many at a time (claim_many, then complete_many; default 1)")
    parser.add_argument("--clients", type=int, default=None,
                        help="random_shapes: consumers a side (default 1; the issue's other column is 8)")
    parser.add_argument("--render", metavar="JSON", default=None, help="report only: redraw from saved results")
    ns = parser.parse_args(argv)
    if ns.scenario == "report" and ns.render:
        from . import report

        report.render(ns.render)
        return 0
    dsn = common.ensure_database(ns.dsn)
    opts = common.Options(dsn=dsn, rows=ns.rows, seconds=ns.seconds, churn_rows=ns.churn_rows, only=ns.only,
                          old=ns.old, count=ns.count, seed=ns.seed, wide=ns.wide, limit=ns.limit,
                          clients=ns.clients)
    module = importlib.import_module(f"bench.{ns.scenario}")
    result = module.run(opts)
    result.setdefault("server", common.server_facts(dsn))
    print(json.dumps(result, indent=None if ns.json else 2, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
