"""Pool limits lowered, raised and removed while tasks of the pool run.

Every mid-run snapshot must pass the checker: counts exact, and no pool holds
more tasks claimed since its limit was last set than that limit. A pool over a
lowered limit only drains (a warning), it never admits.
"""

from __future__ import annotations

import time

from taskqueue import TaskQueue
from tests.chaos.harness import (
    Fleet,
    assert_invariants,
    bump,
    query,
    unfinished,
    wait_all_final,
    wait_for,
)


def test_limits_change_while_tasks_run(tq: TaskQueue, fleet: Fleet) -> None:
    for pool in ("a", "b", "c"):
        tq.set_pool_limit(pool, 4)
    tq.enqueue_many(
        {"payload": {"ms": 30}, "queue": "chaos", "pool": ("a", "b", "c")[i % 3], "max_attempts": 10}
        for i in range(1000)
    )
    fleet.start(3)
    wait_for(lambda: (tq.pool("a").running or 0) >= 2, 60, "pool a to fill")  # type: ignore[union-attr]
    changes = [("a", 1), ("b", 8), ("c", None), ("a", 0), ("b", 2), ("a", 3), ("c", 1), ("c", None)]
    warnings = checks = 0
    for pool, limit in changes:
        tq.set_pool_limit(pool, limit)
        bump("pool limit changes while tasks ran")
        until = time.monotonic() + 0.5
        while time.monotonic() < until:
            report = tq.check()
            assert report.ok, report.to_dict()
            warnings += len(report.of("pool_over_limit"))
            checks += 1
            if pool == "a" and limit == 0:
                # A zero limit admits nothing: a's running count only goes down.
                assert query(fleet.dsn, "SELECT count(*) FROM taskqueue.tasks WHERE pool = 'a' AND state = 'running'"
                             " AND started_at >= (SELECT limit_changed_at FROM taskqueue.pools WHERE name = 'a')")[0][0] == 0
            time.sleep(0.05)
    assert unfinished(fleet.dsn) > 0, "the run ended before the last change; the scenario proved nothing"
    wait_all_final(fleet.dsn, 90)
    assert_invariants(tq, fleet.dsn, expected_tasks=1000)
    assert {p.name: p.limit for p in tq.pools()} == {"a": 3, "b": 2}  # c has no limit and nothing running
    bump("mid-run snapshot checks (all ok)", checks)
    bump("over-lowered-limit warnings seen (draining, not admitting)", warnings)
