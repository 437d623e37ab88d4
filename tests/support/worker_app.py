"""Example workers for tests that run real worker processes.

Use with the CLI (``taskqueue worker tests.support.worker_app:worker``) or
directly (``python -m tests.support.worker_app DSN [--grace S] ...``).

Every handler appends one JSON line when it starts and one when it ends to the
file named by ``$TASKQUEUE_TEST_LOG`` (if set): event, task id, queue, pool,
required, attempt, pid, worker name, and ``time.monotonic()`` (one clock for
every process on the machine), so a test can rebuild who ran what, when, and
how much was running at once. Lines are written with one ``write`` on an
``O_APPEND`` descriptor, so concurrent processes do not interleave them.

Queues and their handlers:
- ``work``: sleeps ``payload["sleep"]`` seconds (default 0) and returns ``{"ok": id}``.
- ``sleep``: sleeps ``payload["seconds"]`` seconds (default 1) and returns the seconds.
- ``fail``: raises ``RuntimeError`` every time.
- ``retry``: raises ``Retry(in_=payload.get("in", 0.1))`` every time.
- ``permanent``: raises ``Permanent``.
- ``awork``: an ``async def`` that awaits ``payload["sleep"]`` seconds (default 0) and returns ``{"ok": id}``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import sys
import threading
import time
from typing import Any

from taskqueue import Permanent, Retry, Task, TaskQueue, Worker

LOG_ENV = "TASKQUEUE_TEST_LOG"


def record(event: str, task: Task, **more: Any) -> None:
    path = os.environ.get(LOG_ENV)
    if not path:
        return
    line = {
        "event": event,
        "task_id": task.id,
        "queue": task.queue,
        "pool": task.pool,
        "required": task.required,
        "priority": task.priority,
        "attempt": task.attempts,
        "pid": os.getpid(),
        "thread": threading.current_thread().name,
        "worker": task.worker,
        "t": time.monotonic(),
        **more,
    }
    data = (json.dumps(line, separators=(",", ":")) + "\n").encode()
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)


def read_log(path: str) -> list[dict[str, Any]]:
    """The lines written so far, in file order."""
    if not os.path.exists(path):
        return []
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def logged(fn):  # type: ignore[no-untyped-def]
    """Record start and end (with the outcome) around a handler."""

    def run(task: Task) -> Any:
        record("start", task)
        try:
            result = fn(task)
        except BaseException as exc:
            record("end", task, outcome=type(exc).__name__)
            raise
        record("end", task, outcome="ok")
        return result

    run.__name__ = fn.__name__
    return run


def build_worker(**settings: Any) -> Worker:
    w = Worker(**{"capacity": 10, "lease": 5.0, "poll_interval": 5.0, "grace": 10.0, **settings})

    @w.handler("work")
    @logged
    def work(task: Task) -> Any:
        time.sleep(float((task.payload or {}).get("sleep", 0)))
        return {"ok": task.id}

    @w.handler("sleep")
    @logged
    def sleep(task: Task) -> Any:
        seconds = float((task.payload or {}).get("seconds", 1))
        time.sleep(seconds)
        return seconds

    @w.handler("fail")
    @logged
    def fail(task: Task) -> Any:
        raise RuntimeError(f"task {task.id} always fails")

    @w.handler("retry")
    @logged
    def retry(task: Task) -> Any:
        raise Retry(in_=float((task.payload or {}).get("in", 0.1)))

    @w.handler("permanent")
    @logged
    def permanent(task: Task) -> Any:
        raise Permanent(f"task {task.id} cannot succeed")

    @w.handler("awork")
    async def awork(task: Task) -> Any:
        record("start", task)
        await asyncio.sleep(float((task.payload or {}).get("sleep", 0)))
        record("end", task, outcome="ok")
        return {"ok": task.id}

    return w


worker = build_worker()
"""Capacity 10, lease 5 s, grace 10 s, every queue above."""

small_worker = build_worker(capacity=3)
"""The same handlers with capacity 3."""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="run the test worker")
    parser.add_argument("dsn")
    parser.add_argument("--capacity", type=int)
    parser.add_argument("--concurrency", type=int)
    parser.add_argument("--lease", type=float)
    parser.add_argument("--grace", type=float)
    parser.add_argument("--queues")
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.INFO, stream=sys.stderr, format="%(asctime)s %(name)s %(levelname)s %(message)s"
    )
    worker.configure(
        queues=None if args.queues is None else args.queues.split(","),
        capacity=args.capacity,
        concurrency=args.concurrency,
        lease=args.lease,
        grace=args.grace,
    )
    with TaskQueue(args.dsn) as tq:
        worker.run(tq)
    return 0


if __name__ == "__main__":
    sys.exit(main())
