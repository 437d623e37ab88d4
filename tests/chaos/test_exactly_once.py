"""Exactly-once effects: an effect written in the completion transaction
happens once per task, however often its processes crash or are killed.

The processes (tests/chaos/direct.py) crash on their own at the worst moments
and are also killed with SIGKILL at random; the test rescues expired leases.
Handlers run by a Worker complete in a transaction of their own, so this
guarantee is for code that claims and completes through the API.
"""

from __future__ import annotations

import os
import random
import subprocess
import sys
import time

from taskqueue import TaskQueue
from tests.chaos.harness import REPO, assert_invariants, bump, query, unfinished

TASKS = 300
PROCESSES = 4


def test_effects_in_the_completion_transaction_happen_exactly_once(tq: TaskQueue, ledger: str) -> None:
    rng = random.Random(7)
    tq.enqueue_many({"payload": {"n": i}, "queue": "effects", "max_attempts": 50} for i in range(TASKS))
    env = {**os.environ, "TASKQUEUE_DSN": ledger}
    procs: list[subprocess.Popen[bytes]] = []

    def spawn() -> None:
        procs.append(
            subprocess.Popen([sys.executable, "-m", "tests.chaos.direct", "effects"], cwd=REPO, env=env,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        )

    for _ in range(PROCESSES):
        spawn()
    kills = crashes = 0
    deadline = time.monotonic() + 90
    while unfinished(ledger) > 0:
        assert time.monotonic() < deadline, "the run did not finish"
        alive = [p for p in procs if p.poll() is None]
        for p in procs:
            if p.poll() in (7, 8) and not getattr(p, "seen", False):
                p.seen = True  # type: ignore[attr-defined]
                crashes += 1
        if alive and kills < 8 and rng.random() < 0.25:
            victim = rng.choice(alive)
            victim.kill()
            victim.wait()
            kills += 1
        while len([p for p in procs if p.poll() is None]) < PROCESSES:
            spawn()
        tq.rescue_expired()
        time.sleep(0.15)
    for p in procs:
        if p.poll() is None:
            p.kill()
        p.wait()

    assert_invariants(tq, ledger, expected_tasks=TASKS)
    per_task = dict(query(ledger, "SELECT task_id, count(*) FROM public.effects GROUP BY task_id"))
    done = [r[0] for r in query(ledger, "SELECT id FROM taskqueue.tasks WHERE state = 'done'")]
    assert len(done) == TASKS
    assert {t: per_task.get(t, 0) for t in done} == {t: 1 for t in done}, "an effect was lost or doubled"
    retried = query(ledger, "SELECT count(*) FROM taskqueue.tasks WHERE attempts > 1")[0][0]
    assert kills + crashes > 0 and retried > 0  # the guarantee was exercised, not assumed
    # Each effect was written by the process whose claim completed the task.
    mismatched = query(
        ledger,
        "SELECT t.id FROM taskqueue.tasks t JOIN public.effects e ON e.task_id = t.id"
        " WHERE (t.result->>'pid')::int <> e.pid",
    )
    assert mismatched == []
    bump("kill -9 of a claim/complete process", kills)
    bump("self-crashes around the completion commit", crashes)
    bump("tasks with exactly-once effects (0 lost, 0 doubled)", TASKS)
