"""The worker the fault-injection suite runs through the CLI:
``python -m taskqueue worker tests.chaos.app:worker --lease 2``.

Every handler first records its execution (task id, attempt, pid) in
``public.executions`` of the test database, on a connection of its own, so
the test can tell every run of every task apart, even runs whose worker died.
"""

from __future__ import annotations

import os
import threading
import time
import uuid

import psycopg

from taskqueue import Task
from taskqueue.worker import Worker

worker = Worker(
    queues=["chaos", "poison", "slow"],
    capacity=int(os.environ.get("CHAOS_CAPACITY", "12")),
    concurrency=int(os.environ.get("CHAOS_CONCURRENCY", "8")),
    lease=2.0,
    poll_interval=1.0,
    grace=1.0,
    maintenance_interval=0.5,
)

_local = threading.local()


def record(task: Task) -> None:
    """Insert the execution row, reconnecting if a chaos step killed the connection.

    An INSERT whose connection died may have committed: the retry carries the
    same run id, so one handler call is one row however often it is sent.
    """
    run_id = uuid.uuid4()
    for attempt in range(50):
        conn = getattr(_local, "conn", None)
        try:
            if conn is None or conn.closed:
                conn = _local.conn = psycopg.connect(
                    os.environ["TASKQUEUE_DSN"], autocommit=True, application_name="chaos-ledger"
                )
            conn.execute(
                "INSERT INTO public.executions (run_id, task_id, attempt, pid) VALUES (%s, %s, %s, %s)"
                " ON CONFLICT (run_id) DO NOTHING",
                (run_id, task.id, task.attempts, os.getpid()),
            )
            return
        except psycopg.OperationalError:
            _local.conn = None
            time.sleep(0.05 * (attempt + 1))
    raise RuntimeError("could not record the execution")


@worker.handler("chaos")
def chaos(task: Task) -> dict[str, int]:
    record(task)
    time.sleep(task.payload.get("ms", 0) / 1000.0)
    return {"pid": os.getpid(), "attempt": task.attempts}


@worker.handler("poison")
def poison(task: Task) -> None:
    """Kills its worker every time: the task must end failed after max_attempts."""
    record(task)
    os._exit(3)


@worker.handler("slow")
def slow(task: Task) -> dict[str, int]:
    record(task)
    time.sleep(task.payload.get("seconds", 1.0))
    return {"pid": os.getpid(), "attempt": task.attempts}
