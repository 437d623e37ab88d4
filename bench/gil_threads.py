"""``python -m bench gil_threads``: what taking turns at the GIL costs a job that computes, with no queue at all.

The drain's CPU cells found the same job's loop 12 to 40% dearer on a worker's
handler threads than in its inline lane. This scenario asks whether the
queue has anything to do with it. In one process, 1, 2, 10 and 64 plain
threads each run the drain's CPU job (``drain_app.spin``) over and over for
``--seconds`` (default 3). Each job is timed on its thread's own clock, and
the process's CPU is timed too. The thread counts run twice, interleaved, in
one run, and only ratios to the single thread are compared. ``--rows`` sets
the loops a job (default 16,000).
"""

from __future__ import annotations

import statistics
import threading
import time
from typing import Any

from . import common
from .drain_app import spin

THREADS = (1, 2, 10, 64)
ROUNDS = 2
DEFAULT_LOOPS = 16_000


def measure(threads: int, loops: int, seconds: float) -> dict[str, Any]:
    """``threads`` threads running jobs of ``loops`` loops for ``seconds``: CPU a job, on each clock."""
    stop = time.monotonic() + seconds
    took: list[float] = []
    lock = threading.Lock()

    def work() -> None:
        mine = []
        while time.monotonic() < stop:
            started = time.thread_time()
            spin(loops)
            mine.append(time.thread_time() - started)
        with lock:
            took.extend(mine)

    workers = [threading.Thread(target=work) for _ in range(threads)]
    cpu, wall = time.process_time(), time.monotonic()
    for t in workers:
        t.start()
    for t in workers:
        t.join()
    cpu, wall = time.process_time() - cpu, time.monotonic() - wall
    return {"threads": threads, "jobs": len(took), "loop_us_mean": round(statistics.mean(took) * 1e6, 1),
            "loop_us_median": round(statistics.median(took) * 1e6, 1),
            "process_us_per_job": round(cpu / len(took) * 1e6, 1), "jobs_per_s": round(len(took) / wall, 1)}


def run(opts: common.Options) -> dict[str, Any]:
    loops = opts.rows or DEFAULT_LOOPS
    seconds = opts.seconds or 3.0
    rounds: list[list[dict[str, Any]]] = []
    with common.progress() as bar:
        task = bar.add_task("gil_threads", total=ROUNDS * len(THREADS))
        for r in range(ROUNDS):
            order = THREADS if r % 2 == 0 else tuple(reversed(THREADS))
            got = []
            for n in order:
                got.append(measure(n, loops, seconds))
                bar.advance(task)
            rounds.append(sorted(got, key=lambda x: x["threads"]))
    summary = []
    single = statistics.median(r[0]["loop_us_mean"] for r in rounds)
    for i, n in enumerate(THREADS):
        loop = statistics.median(r[i]["loop_us_mean"] for r in rounds)
        summary.append({"threads": n, "loop_us_mean": loop, "of_one_thread": common.ratio(loop, single)})
    return {"scenario": "gil_threads", "loops_a_job": loops, "seconds_per_phase": seconds, "rounds": rounds,
            "summary": summary}
