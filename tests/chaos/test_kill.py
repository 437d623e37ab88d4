"""kill -9 of workers: random ones, repeatedly, while replacements start; and a
poison task that kills its worker on every attempt.

Workers run through the CLI with a 2 s lease and a 0.5 s maintenance round
(tests/chaos/app.py), so a killed worker's task must be rescued within
lease + one round of the kill, and claimed again right after (the rescue
sends a NOTIFY).
"""

from __future__ import annotations

import random
import time

from taskqueue import TaskQueue
from tests.chaos.app import worker as app_worker
from tests.chaos.harness import (
    LEASE,
    Fleet,
    assert_invariants,
    bump,
    crash_waits,
    query,
    unfinished,
    wait_all_final,
    wait_for,
    worst,
)

TASKS = 2000
WORKERS = 4
POOLS = {"net-0": 2, "net-1": 3, "net-2": 4, "net-3": 6, "net-4": None}
# Generous: lease + one maintenance round is the bound; the rest is slack for a busy CI machine.
RESCUE_BOUND = LEASE + app_worker.maintenance_interval + 3.0


def test_random_kill_9_with_replacements(tq: TaskQueue, fleet: Fleet) -> None:
    rng = random.Random(20261122)
    for pool, limit in POOLS.items():
        tq.set_pool_limit(pool, limit)
    pools = list(POOLS) + [None] * 4
    tq.enqueue_many(
        {
            "payload": {"ms": rng.randint(5, 30)},
            "queue": "chaos",
            "required": rng.randint(1, 3),
            "pool": rng.choice(pools),
            "priority": rng.randint(0, 3),
            "max_attempts": 10,
        }
        for _ in range(TASKS)
    )
    fleet.start(WORKERS)
    wait_for(lambda: query(fleet.dsn, "SELECT count(*) FROM public.executions")[0][0] > 0, 60, "a first execution")

    kills = 0
    checks = 0
    deadline = time.monotonic() + 90
    next_kill = time.monotonic()
    while unfinished(fleet.dsn) > 0 and time.monotonic() < deadline:
        if time.monotonic() >= next_kill and kills < 30:
            # Only workers already working, and never the last one: the rescue
            # bound assumes some worker lives to run maintenance.
            if fleet.kill_random(rng, survivors=1) is not None:
                kills += 1
                # Often enough that 8 kills land while the backlog drains, however
                # fast the claim makes the drain (in one CI run it took 6 s).
                next_kill = time.monotonic() + rng.uniform(0.2, 0.5)
            fleet.keep(WORKERS)  # replacements start while the others keep working
        report = tq.check()  # every snapshot mid-run: counts exact, no pool over its limit
        assert report.ok, report.to_dict()
        checks += 1
        time.sleep(0.1)
    fleet.keep(WORKERS)
    wait_all_final(fleet.dsn, 90)

    outcome = assert_invariants(tq, fleet.dsn, expected_tasks=TASKS)
    assert query(fleet.dsn, "SELECT count(*) FROM taskqueue.tasks WHERE state = 'done'")[0][0] == TASKS
    assert kills >= 8 and outcome.rescues > 0
    waits = crash_waits(fleet.dsn)
    assert waits, "no killed worker held a task"
    to_rescue = max(w[0] for w in waits)
    to_claim = max(w[1] for w in waits if w[1] is not None)
    assert to_rescue <= RESCUE_BOUND, f"a killed worker's task waited {to_rescue:.2f} s for its rescue"
    worst("worst wait from kill -9 to rescue (s)", to_rescue)
    worst("worst wait from kill -9 to the next claim (s)", to_claim)
    bump("mid-run snapshot checks (all ok)", checks)


def test_poison_task_fails_after_max_attempts_and_the_fleet_survives(tq: TaskQueue, fleet: Fleet) -> None:
    poison_id = tq.enqueue({"die": True}, queue="poison", max_attempts=3, pool="shared")
    tq.set_pool_limit("shared", 2)
    tq.enqueue_many(
        {"payload": {"ms": 5}, "queue": "chaos", "pool": "shared", "max_attempts": 10} for _ in range(300)
    )
    fleet.start(3)
    deadline = time.monotonic() + 90
    while unfinished(fleet.dsn) > 0:
        assert time.monotonic() < deadline, "the run did not finish"
        for proc in fleet.procs:
            if proc.poll() is not None and not getattr(proc, "counted", False):
                proc.counted = True  # type: ignore[attr-defined]
                bump("workers killed by the poison task")
        fleet.keep(3)
        time.sleep(0.2)
    got = tq.get(poison_id)
    assert got is not None and got.state == "failed" and got.attempts == 3
    assert "lease expired" in (got.error or "")
    runs = query(fleet.dsn, "SELECT attempt, pid FROM public.executions WHERE task_id = %s ORDER BY seq",
                 (poison_id,))
    assert [r[0] for r in runs] == [1, 2, 3]
    assert len({r[1] for r in runs}) == 3  # each attempt took a worker down
    dead = [p for p in fleet.procs if p.returncode == 3]
    assert len(dead) == 3
    outcome = assert_invariants(tq, fleet.dsn, expected_tasks=301)
    assert query(fleet.dsn, "SELECT count(*) FROM taskqueue.tasks WHERE state = 'done'")[0][0] == 300
    assert outcome.rescues >= 3
