"""The worker the scheduling benchmark runs with ``taskqueue worker bench.scheduling_app:worker``.

Its one queue's handler sleeps ``payload["seconds"]``: sleeps stand in for
run times, so the benchmark measures scheduling, not CPU.
"""

from __future__ import annotations

import time

from taskqueue import Task, Worker

QUEUE = "sched"

worker = Worker(queues=[QUEUE], lease=10.0, poll_interval=1.0, grace=5.0, maintenance_interval=1.0)


@worker.handler(QUEUE)
def run(task: Task) -> None:
    time.sleep(float(task.payload["seconds"]))
