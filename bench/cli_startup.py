"""``python -m bench.cli_startup [--runs N] [--dsn DSN] [--baseline DIR]``: how fast the command starts.

Times ``taskqueue --help``, ``taskqueue stats`` against ``--dsn`` and
``taskqueue stats`` on the running embedded server, each as a fresh process
(``python -m taskqueue``, what the console script runs). ``--baseline`` names
another checkout (e.g. ``git worktree add /tmp/old <commit>``); its runs are
interleaved with this checkout's, so both see the same machine load. Prints
one JSON document: per command and checkout, the median and fastest wall time
and the median CPU time (user + system, which a busy machine inflates less).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

from . import common

HERE = Path(__file__).resolve().parents[1]
COMMANDS = {"--help": ["--help"], "stats (dsn)": ["stats"], "stats (embedded)": ["stats"]}


def _env(checkout: Path, command: str, dsn: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "TASKQUEUE_DSN"}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(checkout), os.environ.get("PYTHONPATH")) if p)
    if command == "stats (dsn)":
        env["TASKQUEUE_DSN"] = dsn
    return env


def _once(checkout: Path, command: str, dsn: str) -> tuple[float, float]:
    """Wall and CPU seconds of one run."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    began = time.perf_counter()
    subprocess.run([sys.executable, "-m", "taskqueue", *COMMANDS[command]], env=_env(checkout, command, dsn),
                   cwd=checkout, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    wall = time.perf_counter() - began
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def measure(checkouts: dict[str, Path], runs: int, dsn: str) -> dict[str, dict[str, dict[str, float]]]:
    samples: dict[tuple[str, str], list[tuple[float, float]]] = {}
    # Start the embedded server and migrate both databases with this checkout, then warm the page cache.
    for command in ("stats (embedded)", "stats (dsn)"):
        subprocess.run([sys.executable, "-m", "taskqueue", "migrate"], env=_env(HERE, command, dsn), cwd=HERE,
                       stdout=subprocess.DEVNULL, check=True)
    for command in COMMANDS:
        for checkout in checkouts.values():
            _once(checkout, command, dsn)
    for _ in range(runs):
        for command in COMMANDS:
            for name, checkout in checkouts.items():
                samples.setdefault((command, name), []).append(_once(checkout, command, dsn))
    result: dict[str, dict[str, dict[str, float]]] = {}
    for (command, name), values in samples.items():
        walls = [w for w, _ in values]
        cpus = [c for _, c in values]
        result.setdefault(command, {})[name] = {
            "median_s": round(statistics.median(walls), 3),
            "min_s": round(min(walls), 3),
            "cpu_median_s": round(statistics.median(cpus), 3),
            "runs": len(values),
        }
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.cli_startup", description=__doc__)
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--dsn", default=common.DEFAULT_DSN, help="a migrated database is needed (created if missing)")
    parser.add_argument("--baseline", type=Path, default=None, help="another checkout to compare with")
    ns = parser.parse_args(argv)
    dsn = common.ensure_database(ns.dsn)
    checkouts = {"this": HERE}
    if ns.baseline is not None:
        checkouts["baseline"] = ns.baseline.resolve()
    load = os.getloadavg()[0]
    print(json.dumps({"load_average_1min": load, "results": measure(checkouts, ns.runs, dsn)}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
