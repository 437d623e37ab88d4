"""Processes that use the API directly (claim / complete), for the scenarios a
Worker handler cannot express.

``python -m tests.chaos.direct effects``: claim, write an effect row and
complete *in the same transaction* (``complete(task, result, connection=conn)``),
crashing now and then at the worst moments (after the effect, before the
commit; right after the commit). A Worker handler returns its result to the
worker, which completes in a transaction of its own, so effects that must
happen exactly once are written this way instead.

``python -m tests.chaos.direct hold``: claim one task with a 1 s lease, print
``claimed``, then heartbeat until the lease is lost, and try to complete; print
what the database said. The test SIGSTOPs this process past its lease.
"""

from __future__ import annotations

import os
import random
import sys
import time

import sqlalchemy as sa

from taskqueue import LeaseLost, TaskQueue


def effects(tq: TaskQueue) -> None:
    rng = random.Random(os.getpid())
    idle = 0
    while idle < 20:
        task = tq.claim(queues=["effects"], lease=1.0)
        if task is None:
            idle += 1
            time.sleep(0.1)
            continue
        idle = 0
        roll = rng.random()
        with tq.engine.begin() as conn:
            conn.execute(
                sa.text("INSERT INTO public.effects (task_id, pid) VALUES (:id, :pid)"),
                {"id": task.id, "pid": os.getpid()},
            )
            if roll < 0.02:
                os._exit(7)  # crash after the effect, before the commit: both roll back
            tq.complete(task, {"pid": os.getpid()}, connection=conn)
        if roll > 0.98:
            os._exit(8)  # crash right after the commit: both stay


def hold(tq: TaskQueue) -> None:
    task = tq.claim(queues=["hold"], lease=1.0)
    assert task is not None
    print(f"claimed {task.id}", flush=True)
    while True:
        time.sleep(0.2)
        try:
            tq.heartbeat(task)
        except LeaseLost:
            print("heartbeat: LeaseLost", flush=True)
            break
    try:
        tq.complete(task, {"pid": os.getpid(), "stale": True})
        print("complete: ok", flush=True)
    except LeaseLost:
        print("complete: LeaseLost", flush=True)


if __name__ == "__main__":
    with TaskQueue(os.environ["TASKQUEUE_DSN"]) as queue:
        {"effects": effects, "hold": hold}[sys.argv[1]](queue)
