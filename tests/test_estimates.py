"""Estimates in, learnt estimates out, and waiting_heads in the very order the claim takes."""

from __future__ import annotations

import math
import random

import pytest

from taskqueue import TaskQueue, ValidationError
from taskqueue.store import registry as registry_ops
from taskqueue.store.tasks import ESTIMATE_SAMPLE


def heads(tq: TaskQueue, *, queues: list[str] | None = None, limit: int = 1000, descending: bool = False) -> list[int]:
    found = tq.db.run(registry_ops.waiting_heads(queues=queues, limit=limit, descending=descending))
    return [h.id for h in found]


def test_estimate_is_stored_from_enqueue_and_enqueue_many(tq: TaskQueue) -> None:
    one = tq.enqueue({"n": 1}, estimate=2.5)
    plain = tq.enqueue({"n": 2})
    many = tq.enqueue_many([{"payload": 3, "estimate": 7}, {"payload": 4}, {"payload": 5, "estimate": 0.25, "delay": 60}])
    keyed = tq.enqueue_many([{"payload": 6, "estimate": 1.5, "dedupe_key": "k"}])
    got = {i: tq.get(i).estimate for i in [one, plain, *many, *keyed]}  # type: ignore[union-attr]
    assert got == {one: 2.5, plain: None, many[0]: 7.0, many[1]: None, many[2]: 0.25, keyed[0]: 1.5}
    claimed = tq.claim_many(limit=10)
    assert {t.id: t.estimate for t in claimed}[one] == 2.5


@pytest.mark.parametrize("bad", [-1, math.nan, math.inf, "3", True, 11 * 365 * 24 * 3600.0])
def test_bad_estimates_are_refused_before_anything_is_written(tq: TaskQueue, bad: object) -> None:
    with pytest.raises(ValidationError, match="estimate"):
        tq.enqueue({}, estimate=bad)  # type: ignore[arg-type]
    with pytest.raises(ValidationError, match=r"specs\[1\]\.estimate"):
        tq.enqueue_many([{"payload": 1}, {"payload": 2, "estimate": bad}])
    assert tq.stats().total == 0


def test_completions_teach_the_queue_its_run_time(tq: TaskQueue, dsn: str) -> None:
    from tests.support.polling import sql

    tq.enqueue_many([{"payload": i, "queue": "learn"} for i in range(16)])
    tasks = tq.claim_many(limit=16, queues=["learn"])
    sql(dsn, "UPDATE taskqueue.tasks SET started_at = now() - interval '3 seconds' WHERE queue = 'learn'")
    tq.complete_many([(t, None) for t in tasks[:8]])  # batched: every task counts
    for t in tasks[8:]:
        tq.complete(t)  # one at a time: one task in ESTIMATE_SAMPLE (by id) counts
    learnt = tq.db.run(registry_ops.learnt_estimates(["learn", "other"]))
    assert set(learnt) == {"learn"}
    assert 2.9 < learnt["learn"] < 3.5
    [(finished,)] = sql(dsn, "SELECT sum(finished) FROM taskqueue.queue_estimates")
    assert finished == 8 + sum(1 for t in tasks[8:] if t.id % ESTIMATE_SAMPLE == 0)


@pytest.mark.parametrize("descending", [False, True])
def test_waiting_heads_is_the_claim_order(tq: TaskQueue, descending: bool) -> None:
    rnd = random.Random(7)
    tq.set_pool_limit("full", 1)
    tq.enqueue({}, queue="a", pool="full")
    assert tq.claim(queues=["a"]) is not None  # the pool is now full: its other tasks are skipped
    tq.enqueue_many(
        [
            {
                "payload": i,
                "queue": rnd.choice(["a", "b"]),
                "priority": rnd.randint(0, 3),
                "required": rnd.randint(0, 5),
                "pool": "full" if rnd.random() < 0.15 else None,
            }
            for i in range(120)
        ]
    )
    order = "max" if descending else "min"
    got = heads(tq, descending=descending)
    assert heads(tq, descending=descending, limit=17) == got[:17]
    assert heads(tq, queues=["a", "b"], descending=descending, limit=17) == got[:17]
    assert heads(tq, queues=["b"], descending=descending) == [
        i for i in got if tq.get(i).queue == "b"  # type: ignore[union-attr]
    ]
    claimed = []
    while (task := tq.claim(order=order)) is not None:
        claimed.append(task.id)
    assert got == claimed
    assert len(claimed) < 120  # the full pool's tasks were left out by both
