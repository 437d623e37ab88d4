"""Batched completion: one commit for many claims, token-checked, pools released exactly."""

from __future__ import annotations

from taskqueue import TaskQueue
from tests.support.apis import tq  # noqa: F401  (the contract runs against both APIs)


def test_complete_many_finishes_each_claim_and_releases_pools(tq: TaskQueue) -> None:
    tq.set_pool_limit("b", 1)
    for pool in ("b", "a", "a", None):
        tq.enqueue({"p": pool}, pool=pool)
    tasks = tq.claim_many(limit=10)
    assert len(tasks) == 4
    assert tq.pool("a").running == 2 and tq.pool("b").running == 1

    lost = tq.complete_many([(t, {"id": t.id}) for t in tasks])

    assert lost == []
    assert tq.pool("a").running == 0 and tq.pool("b").running == 0
    for t in tasks:
        row = tq.get(t.id)
        assert row.state == "done" and row.result == {"id": t.id}
        assert t.state == "done"


def test_complete_many_reports_lost_leases_and_keeps_the_rest(tq: TaskQueue) -> None:
    tq.enqueue(1, pool="n")
    tq.enqueue(2, pool="n")
    first, second = tq.claim_many(limit=2)
    tq.complete(first)  # first is finished already: its token no longer matches

    lost = tq.complete_many([(first, None), (second, None)])

    assert lost == [first.id]
    assert tq.get(second.id).state == "done"
    assert tq.pool("n").running == 0


def test_complete_many_of_nothing_is_a_no_op(tq: TaskQueue) -> None:
    assert tq.complete_many([]) == []
