"""Sessions that misbehave next to the workers: one idle in transaction holding
a queued task's row, one holding a running task's row, and a long REPEATABLE
READ transaction holding back vacuum. Claims go on around them; the blocked
tasks are handled once the blockers die.
"""

from __future__ import annotations

import psycopg

from taskqueue import TaskQueue
from tests.chaos.harness import (
    Fleet,
    assert_invariants,
    bump,
    query,
    terminate_backends,
    unfinished,
    wait_all_final,
    wait_for,
)


def test_idle_in_transaction_blockers_do_not_stop_claims(tq: TaskQueue, fleet: Fleet) -> None:
    queued_id = tq.enqueue({"ms": 1}, queue="chaos", priority=-10)  # first in line, but locked below
    slow_id = tq.enqueue({"seconds": 1.0}, queue="slow")
    tq.enqueue_many({"payload": {"ms": 2}, "queue": "chaos", "max_attempts": 10} for _ in range(300))

    blockers = []
    # A long transaction holding a snapshot: vacuum cannot remove the queue's dead rows meanwhile.
    snapshot = psycopg.connect(fleet.dsn, application_name="chaos-blocker")
    snapshot.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
    snapshot.execute("SELECT count(*) FROM taskqueue.tasks")
    blockers.append(snapshot)
    # Idle in transaction, holding the queued task's row.
    holder = psycopg.connect(fleet.dsn, application_name="chaos-blocker")
    holder.execute("SELECT id FROM taskqueue.tasks WHERE id = %s FOR UPDATE", (queued_id,))
    blockers.append(holder)
    try:
        fleet.start(2)
        # Once the slow task runs, hold its row too: its completion will have to wait.
        wait_for(lambda: query(fleet.dsn, "SELECT count(*) FROM public.executions WHERE task_id = %s",
                               (slow_id,))[0][0] >= 1, 60, "the slow task to start")
        running_holder = psycopg.connect(fleet.dsn, application_name="chaos-blocker")
        running_holder.execute("SELECT id FROM taskqueue.tasks WHERE id = %s FOR UPDATE", (slow_id,))
        blockers.append(running_holder)

        # Everything else is claimed and finished around the blockers.
        wait_for(lambda: unfinished(fleet.dsn) <= 2, 90, "the unblocked tasks to finish")
        states = dict(query(fleet.dsn, "SELECT id, state FROM taskqueue.tasks WHERE id = ANY(%s)",
                            ([queued_id, slow_id],)))
        assert states[queued_id] == "queued"  # skipped, never waited for
        assert states[slow_id] == "running"
        idle = query(fleet.dsn, "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'chaos-blocker'"
                                " AND state = 'idle in transaction'")[0][0]
        assert idle == 3
        assert tq.check().ok
    finally:
        killed = terminate_backends(fleet.dsn, ["chaos-blocker"])  # the blockers die
        for conn in blockers:
            conn.close()
    assert killed == 3
    wait_all_final(fleet.dsn, 60)
    outcome = assert_invariants(tq, fleet.dsn, expected_tasks=302)
    assert tq.get(queued_id).state == "done"  # type: ignore[union-attr]
    assert tq.get(slow_id).state == "done"  # type: ignore[union-attr]
    assert outcome.tasks == 302
    bump("idle-in-transaction blockers terminated", killed)
