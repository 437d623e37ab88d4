"""pg_terminate_backend on the workers' connections mid-run: the pooled ones
(application_name 'taskqueue'), the LISTEN one ('taskqueue-listener') and the
maintenance leader's ('taskqueue-leader'). Workers reconnect and carry on;
an outcome whose commit was cut off is settled by the rescue.
"""

from __future__ import annotations

import time

from taskqueue import TaskQueue
from tests.chaos.harness import (
    Fleet,
    assert_invariants,
    bump,
    terminate_backends,
    unfinished,
    wait_all_final,
    wait_for,
)

WORKER_APPS = ("taskqueue", "taskqueue-listener", "taskqueue-leader")


def test_terminated_connections_are_replaced(tq: TaskQueue, fleet: Fleet) -> None:
    tq.set_pool_limit("net", 3)
    tq.enqueue_many(
        {"payload": {"ms": 3}, "queue": "chaos", "pool": "net" if i % 2 else None, "required": 1 + i % 3,
         "max_attempts": 10}
        for i in range(800)
    )
    fleet.start(3)
    wait_for(lambda: len(fleet.ready()) == 3, 60, "three workers")
    rounds = terminated = 0
    while unfinished(fleet.dsn) > 0 and rounds < 8:
        time.sleep(0.4)
        terminated += terminate_backends(fleet.dsn, WORKER_APPS)
        rounds += 1
    wait_all_final(fleet.dsn, 90)
    assert rounds >= 3 and terminated >= 3 * 3  # at least the three LISTEN connections, three times
    assert len(fleet.alive()) == 3  # nobody died of it
    logs = fleet.logs()
    assert "LISTEN connection re-established" in logs

    # They carry on: new work is picked up without any restart.
    more = tq.enqueue_many({"payload": {"ms": 1}, "queue": "chaos"} for _ in range(50))
    wait_all_final(fleet.dsn, 60)
    assert all(tq.get(i).state == "done" for i in more)  # type: ignore[union-attr]
    assert_invariants(tq, fleet.dsn, expected_tasks=850)
    bump("pg_terminate_backend of worker connections", terminated)
