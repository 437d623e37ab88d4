"""SIGSTOP past the lease, then SIGCONT: the frozen holder's heartbeat and
completion are refused (LeaseLost), the task's new holder finishes it once,
and the pool slot is released exactly once.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys

from taskqueue import TaskQueue
from tests.chaos.harness import (
    LEASE,
    REPO,
    Fleet,
    assert_invariants,
    bump,
    query,
    wait_all_final,
    wait_for,
)


def test_frozen_api_holder_is_refused_after_sigcont(tq: TaskQueue, ledger: str) -> None:
    tq.set_pool_limit("solo", 1)
    task_id = tq.enqueue({"frozen": True}, queue="hold", pool="solo")
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.chaos.direct", "hold"],
        cwd=REPO,
        env={**os.environ, "TASKQUEUE_DSN": ledger},
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == f"claimed {task_id}"  # pause point: it holds the claim
        proc.send_signal(signal.SIGSTOP)
        bump("SIGSTOP past the lease")
        wait_for(lambda: tq.rescue_expired() == 1, 20, "the frozen holder's lease to be rescued")
        again = tq.claim(queues=["hold"])
        assert again is not None and again.id == task_id and again.attempts == 2
        assert tq.pool("solo").running == 1
        tq.complete(again, {"by": "the new holder"})
        assert tq.pool("solo").running == 0
        proc.send_signal(signal.SIGCONT)
        out, _ = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert out.splitlines() == ["heartbeat: LeaseLost", "complete: LeaseLost"]
    got = tq.get(task_id)
    assert got is not None and got.state == "done" and got.result == {"by": "the new holder"}
    assert tq.pool("solo").running == 0  # not released a second time
    assert_invariants(tq, ledger, expected_tasks=1)


def _freeze_slow_task_holder(tq: TaskQueue, fleet: Fleet, *, must_lead: bool) -> tuple[int, "subprocess.Popen[bytes]"]:
    """Start a worker, let it take a slow task, and SIGSTOP it mid-handler."""
    frozen = fleet.start(1)[0]
    if must_lead:
        wait_for(lambda: "became the maintenance leader" in fleet.log_of(frozen), 60, "the worker to lead")
    else:
        wait_for(lambda: frozen in fleet.ready(), 60, "the worker to start")
    tq.set_pool_limit("solo", 1)
    slow_id = tq.enqueue({"seconds": 1.5}, queue="slow", pool="solo")
    wait_for(lambda: query(fleet.dsn, "SELECT count(*) FROM public.executions")[0][0] == 1, 60,
             "the slow task to start")
    frozen.send_signal(signal.SIGSTOP)
    bump("SIGSTOP past the lease")
    return slow_id, frozen


def _slow_task_done(fleet: Fleet, slow_id: int) -> bool:
    return query(fleet.dsn, "SELECT state FROM taskqueue.tasks WHERE id = %s", (slow_id,))[0][0] == "done"


def test_frozen_worker_is_refused_after_sigcont(tq: TaskQueue, fleet: Fleet) -> None:
    # The maintenance leader is a healthy worker that serves another queue, so
    # the frozen worker takes the slow task but not the leadership.
    leader = fleet.start(1, "--queues", "chaos")[0]
    wait_for(lambda: "became the maintenance leader" in fleet.log_of(leader), 60, "a healthy leader")
    slow_id, frozen = _freeze_slow_task_holder(tq, fleet, must_lead=False)
    try:
        tq.enqueue_many({"payload": {"ms": 5}, "queue": "chaos", "pool": "solo"} for _ in range(20))
        fleet.start(1)  # a healthy worker re-runs the rescued slow task
        wait_for(lambda: _slow_task_done(fleet, slow_id), 60, "the slow task to be done by a healthy worker")
        assert tq.check().ok
    finally:
        frozen.send_signal(signal.SIGCONT)
    wait_all_final(fleet.dsn, 60)
    wait_for(lambda: "lease lost" in fleet.log_of(frozen), 30, "the frozen worker to notice its lost lease")
    runs = query(fleet.dsn, "SELECT attempt, pid FROM public.executions WHERE task_id = %s ORDER BY seq", (slow_id,))
    assert [r[0] for r in runs] == [1, 2] and runs[0][1] == frozen.pid and runs[1][1] != frozen.pid
    got = tq.get(slow_id)
    assert got is not None and got.result == {"pid": runs[1][1], "attempt": 2}  # the new holder's outcome
    assert frozen.poll() is None  # it carried on after SIGCONT
    assert tq.pool("solo").running == 0
    assert_invariants(tq, fleet.dsn, expected_tasks=21)


def test_frozen_maintenance_leader_does_not_block_rescue(tq: TaskQueue, fleet: Fleet) -> None:
    """A frozen leader keeps its socket (and so its advisory lock) open; the
    leader session's idle_session_timeout ends it, and a healthy worker takes
    over the rescue."""
    slow_id, frozen = _freeze_slow_task_holder(tq, fleet, must_lead=True)
    try:
        fleet.start(1)
        wait_for(lambda: _slow_task_done(fleet, slow_id), 4 * LEASE, "a healthy worker to rescue and re-run it")
    finally:
        frozen.send_signal(signal.SIGCONT)
    wait_all_final(fleet.dsn, 60)
    assert_invariants(tq, fleet.dsn, expected_tasks=1)
