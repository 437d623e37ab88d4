"""The handlers of the drain benchmark, as each library's own runner loads them.

taskqueue: ``taskqueue worker bench.drain_app:worker`` (the real CLI; flags as a
user would pass them). PGQueuer: ``python -m bench.drain_app pgq`` runs
``PgQueuer(AsyncpgDriver(conn)).run(batch_size=...)`` on uvloop, which is what
``pgq run`` does; ``--instances K`` runs K of them in the one process, as
PGQueuer's own benchmark does.

The environment says which handler to run (``BENCH_HANDLER``: noop, sleep,
cpu (a fixed amount of work, about 1 ms of CPU:
``BENCH_CPU_LOOPS`` loops, calibrated once by the benchmark and given to
every process of both libraries), stamp, async_noop: a no-op ``async def`` on taskqueue's event loop,
async_sleep: ``await asyncio.sleep(0.001)`` there, as PGQueuer's sleep
handler does, async_cpu: the 1 ms of CPU burnt inside an ``async def`` there,
as PGQueuer's cpu handler burns it) and where to say "connected and listening"
(``BENCH_READY``: a directory; one file per process). Imports, connecting and
LISTEN all happen before that file appears, so none of it is on the clock.
``stamp`` appends ``task_id started_at`` (``time.time()``) for every probe task
to ``BENCH_STAMPS``, for the latency measurement (with ``BENCH_STAMP_CPU=1``
every other task is a CPU job; with ``BENCH_STAMP_ASYNC=1`` the handler is an
``async def``, on the worker's event loop or in its inline lane).
"""

from __future__ import annotations

import argparse
import os
import threading
import time
from typing import Any

HANDLER = os.environ.get("BENCH_HANDLER", "noop")
SLEEP_SECONDS = 0.001
CPU_SECONDS = 0.001


def spin(loops: int) -> int:
    """One CPU job's work: the same number of loops whatever else the process runs (it holds the GIL).

    A job's work is counted, not timed. A loop that burns until 1 ms of wall
    time has passed does less work when another thread takes the GIL from it
    midway (its clock runs on while it waits), which favoured a worker of
    many threads over a single event loop: 935 against 1,035 µs of CPU a job.
    """
    x = 0
    for i in range(loops):
        x += i
    return x


#: ``BENCH_CPU_LOG=FILE`` (set by the drain for its CPU cells): the CPU handlers time each job's loop on
#: its thread's clock and, every ``CPU_LOG_EVERY`` jobs, append "pid jobs loop_cpu" (seconds, cumulative)
#: to FILE. The same loop's CPU time moves by a third from one minute to the next on a shared machine, so
#: a cell's jobs/s says little until it is set against what its jobs' loops cost in that cell.
CPU_LOG = os.environ.get("BENCH_CPU_LOG")
CPU_LOG_EVERY = 250
_cpu_log = {"jobs": 0, "loop": 0.0}
_cpu_log_lock = threading.Lock()


def cpu_job(loops: int) -> None:
    """One CPU job, its loop timed when ``BENCH_CPU_LOG`` asks (a thread_time pair costs about 0.5 µs)."""
    if not CPU_LOG:
        spin(loops)
        return
    started = time.thread_time()
    spin(loops)
    took = time.thread_time() - started
    with _cpu_log_lock:  # handler threads of one process share the sums
        _cpu_log["loop"] += took
        _cpu_log["jobs"] += 1
        due = _cpu_log["jobs"] % CPU_LOG_EVERY == 0
        line = f"{os.getpid()} {_cpu_log['jobs']} {_cpu_log['loop']!r}\n" if due else ""
    if line:
        with open(CPU_LOG, "a") as f:
            f.write(line)


def job_loop_us(path: str) -> float | None:
    """CPU time of one job's loop (µs) from a ``BENCH_CPU_LOG`` file: each process's first to last line, summed.

    None when no process wrote two lines (fewer than ``2 * CPU_LOG_EVERY`` jobs each).
    """
    seen: dict[str, list[tuple[int, float]]] = {}
    with open(path) as f:
        for line in f:
            pid, jobs, loop = line.split()
            seen.setdefault(pid, []).append((int(jobs), float(loop)))
    jobs = loop_cpu = 0.0
    for marks in seen.values():
        if len(marks) >= 2:
            jobs += marks[-1][0] - marks[0][0]
            loop_cpu += marks[-1][1] - marks[0][1]
    return round(loop_cpu / jobs * 1e6, 1) if jobs else None


def calibrate(seconds: float = CPU_SECONDS) -> int:
    """How many ``spin`` loops take ``seconds`` of CPU on this machine (best of several timings)."""
    probe = 100_000
    best = min(_timed(probe) for _ in range(7))
    return max(1, round(probe * seconds / best))


def _timed(loops: int) -> float:
    started = time.perf_counter()
    spin(loops)
    return time.perf_counter() - started


def burn_loops() -> int:
    """The work of one CPU job: ``BENCH_CPU_LOOPS`` (set once by the benchmark for every process), else calibrated."""
    given = os.environ.get("BENCH_CPU_LOOPS")
    return int(given) if given else calibrate()


def mark_ready() -> None:
    folder = os.environ.get("BENCH_READY")
    if folder:
        with open(os.path.join(folder, str(os.getpid())), "w") as f:
            f.write("ready")


def _stamp(task_id: int) -> None:
    started = time.time()
    path = os.environ["BENCH_STAMPS"]
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, f"{task_id} {started!r}\n".encode())
    finally:
        os.close(fd)


def _stamp_or_spin(task: Any) -> None:
    """A probe stamps its start; with ``BENCH_STAMP_CPU`` every other task is a CPU job."""
    if isinstance(task.payload, dict) and task.payload.get("probe"):
        _stamp(task.id)
    elif STAMP_CPU:  # the backlog does a CPU job each, so that a busy worker's claim rounds are far apart
        spin(LOOPS)


# -- taskqueue -----------------------------------------------------------------
#: ``stamp`` with ``BENCH_STAMP_CPU=1``: the backlog's tasks are CPU jobs, the probes still stamp at once.
STAMP_CPU = bool(os.environ.get("BENCH_STAMP_CPU"))
LOOPS = burn_loops() if HANDLER in ("cpu", "async_cpu") or STAMP_CPU else 0


def _make_worker() -> Any:
    from taskqueue import Task, Worker

    w = Worker()

    if HANDLER == "noop":

        def handle(task: Task) -> None:
            return None

    elif HANDLER == "sleep":

        def handle(task: Task) -> None:
            time.sleep(SLEEP_SECONDS)

    elif HANDLER == "cpu":

        def handle(task: Task) -> None:
            cpu_job(LOOPS)

    elif HANDLER == "async_noop":  # an ``async def``: run on the worker's event loop, not its threads

        async def handle(task: Task) -> None:  # type: ignore[misc]
            return None

    elif HANDLER == "async_sleep":  # the 1 ms wait as PGQueuer's handler waits: awaited, on the event loop
        import asyncio

        async def handle(task: Task) -> None:  # type: ignore[misc]
            await asyncio.sleep(SLEEP_SECONDS)

    elif HANDLER == "async_cpu":  # the 1 ms of CPU as PGQueuer's handler burns it: in a coroutine, on the loop

        async def handle(task: Task) -> None:  # type: ignore[misc]
            cpu_job(LOOPS)

    elif HANDLER == "stamp" and os.environ.get("BENCH_STAMP_ASYNC"):  # the same, as a coroutine

        async def handle(task: Task) -> None:  # type: ignore[misc]
            _stamp_or_spin(task)

    elif HANDLER == "stamp":

        def handle(task: Task) -> None:
            _stamp_or_spin(task)

    else:
        raise SystemExit(f"unknown BENCH_HANDLER {HANDLER!r}")

    w.handler("default", handle)

    def announce() -> None:
        w.ready.wait()
        mark_ready()

    threading.Thread(target=announce, daemon=True).start()
    return w


# -- PGQueuer --------------------------------------------------------------------
def _pgq_handler() -> Any:
    import asyncio

    if HANDLER == "noop":

        async def handle(job: Any) -> None:
            return None

    elif HANDLER == "sleep":

        async def handle(job: Any) -> None:
            await asyncio.sleep(SLEEP_SECONDS)

    elif HANDLER == "cpu":

        async def handle(job: Any) -> None:
            cpu_job(LOOPS)

    else:
        raise SystemExit(f"unknown BENCH_HANDLER {HANDLER!r} for PGQueuer")
    return handle


async def _pgq_main(dsn: str, instances: int, batch: int) -> None:
    import asyncio
    from datetime import timedelta

    import asyncpg
    from pgqueuer import PgQueuer
    from pgqueuer.db import AsyncpgDriver

    listening = 0

    class AnnouncingDriver(AsyncpgDriver):
        """PGQueuer's asyncpg driver, unchanged but for saying when its LISTEN is in place."""

        async def add_listener(self, channel: str, callback: Any) -> None:
            nonlocal listening
            await super().add_listener(channel, callback)
            listening += 1
            if listening == instances:
                mark_ready()

    handle = _pgq_handler()
    queuers = []
    for _ in range(instances):
        pgq = PgQueuer(AnnouncingDriver(await asyncpg.connect(dsn)))
        pgq.entrypoint("noop")(handle)
        queuers.append(pgq)
    # What `pgq run` passes (its defaults), batch size aside.
    await asyncio.gather(
        *(
            q.run(batch_size=batch, dequeue_timeout=timedelta(seconds=30), heartbeat_timeout=timedelta(seconds=30))
            for q in queuers
        )
    )


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.drain_app")
    parser.add_argument("library", choices=["pgq"])
    parser.add_argument("--dsn", required=True)
    parser.add_argument("--batch", type=int, default=10)
    parser.add_argument("--instances", type=int, default=1)
    ns = parser.parse_args()
    import logging
    import signal

    import uvloop

    logging.getLogger("pgqueuer").setLevel(logging.WARNING)
    # SIGTERM ends the process at once: the clock has stopped by then.
    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
    uvloop.run(_pgq_main(ns.dsn, ns.instances, ns.batch))


if __name__ == "__main__":
    main()
else:
    worker = _make_worker() if os.environ.get("BENCH_HANDLER") else None
