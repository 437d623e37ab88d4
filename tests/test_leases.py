"""Leases, fencing tokens, heartbeat, complete, fail, retry backoff, rescue, cancel."""

from __future__ import annotations

import random

import psycopg
import pytest

from taskqueue import LeaseLost, Pool, Task, TaskQueue
from taskqueue.retry import CAP_SECONDS, backoff_seconds
from taskqueue.store import tasks as task_ops
from taskqueue.store.tasks import ESTIMATE_SAMPLE
from tests.support.apis import tq  # noqa: F401  (the contract runs against both APIs)


def expire(dsn: str, *ids: int) -> None:
    """Move leases into the past in the database, instead of waiting."""
    with psycopg.connect(dsn) as conn:
        conn.execute(
            "UPDATE taskqueue.tasks SET lease_expires_at = now() - interval '1 second' WHERE id = ANY(%s)",
            (list(ids),),
        )


def row(dsn: str, task_id: int) -> dict:
    with psycopg.connect(dsn) as conn:
        cur = conn.execute(
            "SELECT *, EXTRACT(EPOCH FROM run_at - now()) AS run_in FROM taskqueue.tasks WHERE id = %s",
            (task_id,),
        )
        names = [d.name for d in cur.description]  # type: ignore[union-attr]
        values = cur.fetchone()
    assert values is not None
    return dict(zip(names, values))


def claim_one(tq: TaskQueue, **kwargs) -> Task:  # type: ignore[no-untyped-def]
    task = tq.claim(**kwargs)
    assert task is not None
    return task


# -- heartbeat --------------------------------------------------------------


def test_heartbeat_extends_by_own_lease_length(tq: TaskQueue, dsn: str) -> None:
    tq.enqueue("x")
    task = claim_one(tq, lease=100)
    tq.heartbeat(task)
    r = row(dsn, task.id)
    with psycopg.connect(dsn) as conn:
        left = conn.execute(
            "SELECT EXTRACT(EPOCH FROM lease_expires_at - now()) FROM taskqueue.tasks WHERE id = %s", (task.id,)
        ).fetchone()[0]  # type: ignore[index]
    assert 98 <= float(left) <= 100.5
    assert task.lease_expires_at == r["lease_expires_at"]


def test_heartbeat_with_lease_sets_now_plus_lease(tq: TaskQueue, dsn: str) -> None:
    tq.enqueue("x")
    task = claim_one(tq, lease=100)
    tq.heartbeat(task, lease=5)
    with psycopg.connect(dsn) as conn:
        left = conn.execute(
            "SELECT EXTRACT(EPOCH FROM lease_expires_at - now()) FROM taskqueue.tasks WHERE id = %s", (task.id,)
        ).fetchone()[0]  # type: ignore[index]
    assert 3 <= float(left) <= 5.5  # shortened, not extended by 100
    tq.heartbeat(task, lease=1000)
    with psycopg.connect(dsn) as conn:
        left = conn.execute(
            "SELECT EXTRACT(EPOCH FROM lease_expires_at - now()) FROM taskqueue.tasks WHERE id = %s", (task.id,)
        ).fetchone()[0]  # type: ignore[index]
    assert 998 <= float(left) <= 1000.5
    tq.heartbeat(task)  # back to the claim's own length
    with psycopg.connect(dsn) as conn:
        left = conn.execute(
            "SELECT EXTRACT(EPOCH FROM lease_expires_at - now()) FROM taskqueue.tasks WHERE id = %s", (task.id,)
        ).fetchone()[0]  # type: ignore[index]
    assert 98 <= float(left) <= 100.5


def test_heartbeat_keeps_task_from_rescue(tq: TaskQueue, dsn: str) -> None:
    tq.enqueue("x")
    task = claim_one(tq, lease=60)
    expire(dsn, task.id)
    tq.heartbeat(task)  # the holder is still current until a rescue happens
    assert tq.rescue_expired() == 0
    assert tq.get(task.id).state == "running"  # type: ignore[union-attr]


# -- complete and LeaseLost -------------------------------------------------


def test_complete_stores_result_and_finishes(tq: TaskQueue) -> None:
    tid = tq.enqueue("x")
    task = claim_one(tq)
    tq.complete(task, {"answer": 42})
    got = tq.get(tid)
    assert got is not None and got.state == "done" and got.result == {"answer": 42}
    assert got.finished_at is not None and got.lease_expires_at is None
    assert task.state == "done"


def test_complete_twice_raises_and_never_releases_twice(tq: TaskQueue) -> None:
    tq.set_pool_limit("p", 2)
    tq.enqueue_many([{"payload": i, "pool": "p"} for i in range(3)])
    first, second = claim_one(tq), claim_one(tq)
    tq.complete(first)
    assert tq.pool("p") == Pool("p", 2, 1)
    with pytest.raises(LeaseLost) as exc:
        tq.complete(first)
    assert exc.value.task_id == first.id
    assert tq.pool("p") == Pool("p", 2, 1)  # not released a second time
    with pytest.raises(LeaseLost):
        tq.fail(first, "after complete")
    with pytest.raises(LeaseLost):
        tq.heartbeat(first)
    assert tq.pool("p") == Pool("p", 2, 1)
    assert tq.get(first.id).state == "done"  # type: ignore[union-attr]
    tq.complete(second)
    assert tq.pool("p") == Pool("p", 2, 0)


def test_complete_of_a_task_without_pool_lets_the_row_decide(tq: TaskQueue, dsn: str) -> None:
    """complete() ends a task it knows no pool of with one plain UPDATE, which matches no pooled row:
    a pool given to the row behind the handle's back still gets its slot back, and a lost lease
    still raises."""
    tq.enqueue_many([{"payload": i} for i in range(2)])
    edited, lost = claim_one(tq), claim_one(tq)
    assert edited.id % ESTIMATE_SAMPLE != 0 and lost.id % ESTIMATE_SAMPLE != 0  # the plain UPDATE's case
    with psycopg.connect(dsn) as conn:
        conn.execute("INSERT INTO taskqueue.pools (name, running) VALUES ('edited', 1)")
        conn.execute("UPDATE taskqueue.tasks SET pool = 'edited' WHERE id = %s", (edited.id,))
    tq.complete(edited)
    assert tq.pool("edited") == Pool("edited", None, 0)
    assert tq.get(edited.id).state == "done"  # type: ignore[union-attr]
    expire(dsn, lost.id)
    assert tq.rescue_expired() == 1
    with pytest.raises(LeaseLost):
        tq.complete(lost)
    assert tq.get(lost.id).state == "queued"  # type: ignore[union-attr]


def test_complete_of_a_pooled_task_outside_the_sample_releases_its_slot_once(tq: TaskQueue, dsn: str) -> None:
    """A pooled task whose id is outside the estimate's sample ends with complete_task_pooled: its slot
    comes back, a full pool frees, a second completion releases nothing, and a lost lease raises."""
    tq.set_pool_limit("p", 2)
    ids = tq.enqueue_many([{"payload": i, "pool": "p"} for i in range(2 * ESTIMATE_SAMPLE)])
    outside = [i for i in ids if i % ESTIMATE_SAMPLE != 0][:3]
    with psycopg.connect(dsn) as conn:  # only the three chosen ones are claimable
        conn.execute("UPDATE taskqueue.tasks SET state = 'cancelled' WHERE NOT (id = ANY(%s))", (outside,))
    done, lost = claim_one(tq), claim_one(tq)
    assert {done.id, lost.id} <= set(outside) and tq.pool("p") == Pool("p", 2, 2)
    tq.complete(done, result={"ok": 1})
    assert tq.pool("p") == Pool("p", 2, 1)
    with psycopg.connect(dsn) as conn:
        freed = conn.execute("SELECT freed_at IS NOT NULL FROM taskqueue.pools WHERE name = 'p'").fetchone()
    assert freed == (True,)  # full to room, in the same statement
    got = tq.get(done.id)
    assert got is not None and got.state == "done" and got.result == {"ok": 1}
    with pytest.raises(LeaseLost):
        tq.complete(done)
    assert tq.pool("p") == Pool("p", 2, 1)  # not released a second time
    expire(dsn, lost.id)
    assert tq.rescue_expired() == 1
    assert tq.pool("p") == Pool("p", 2, 0)
    with pytest.raises(LeaseLost):
        tq.complete(lost)
    assert tq.pool("p") == Pool("p", 2, 0)
    assert tq.check().ok


@pytest.mark.parametrize(("task_id", "pooled", "statement"), [
    (9, True, "complete_task_pooled"), (9, False, "complete_task_alone"),
    (8, True, "complete_task"), (8, False, "complete_task"),
])
def test_a_completion_picks_its_statement_by_pool_and_sample(task_id: int, pooled: bool, statement: str) -> None:
    """Only the sampled ids (one in ESTIMATE_SAMPLE) pay complete_task's upsert of the queue's estimate."""
    first_request = next(task_ops.complete(task_id, "token", None, "channel", pooled=pooled))
    assert first_request.name == statement


def test_fail_after_complete_raises(tq: TaskQueue) -> None:
    tq.enqueue("x")
    task = claim_one(tq)
    tq.fail(task, "boom", retry=False)
    with pytest.raises(LeaseLost):
        tq.complete(task)
    got = tq.get(task.id)
    assert got is not None and got.state == "failed" and got.error == "boom"


def test_stale_handle_after_rescue_is_fenced(tq: TaskQueue, dsn: str) -> None:
    tq.set_pool_limit("p", 1)
    tid = tq.enqueue("x", pool="p")
    stale = claim_one(tq, worker="old")
    expire(dsn, tid)
    assert tq.rescue_expired() == 1
    assert tq.pool("p") == Pool("p", 1, 0)
    fresh = claim_one(tq, worker="new")
    assert fresh.id == tid and fresh.attempts == 2 and fresh.lease_token != stale.lease_token
    before = row(dsn, tid)
    for action in (lambda: tq.heartbeat(stale), lambda: tq.complete(stale, "x"), lambda: tq.fail(stale, "x")):
        with pytest.raises(LeaseLost):
            action()
    after = row(dsn, tid)
    assert after == {**before, "run_in": after["run_in"]}  # nothing changed
    assert tq.pool("p") == Pool("p", 1, 1)
    tq.complete(fresh, "ok")
    assert tq.get(tid).state == "done"  # type: ignore[union-attr]
    assert tq.pool("p") == Pool("p", 1, 0)


def test_heartbeat_many_reports_lost(tq: TaskQueue, dsn: str) -> None:
    tq.enqueue_many([{"payload": i} for i in range(3)])
    a, b, c = tq.claim_many(limit=3)
    tq.complete(b)
    expire(dsn, c.id)
    tq.rescue_expired()
    lost = tq.heartbeat_many([a, b, c])
    assert [t.id for t in lost] == [b.id, c.id]


# -- fail, retry, backoff -----------------------------------------------------


def test_fail_with_retry_in_schedules(tq: TaskQueue, dsn: str) -> None:
    tid = tq.enqueue("x", max_attempts=3)
    task = claim_one(tq)
    tq.fail(task, "try later", retry_in=30)
    r = row(dsn, tid)
    assert r["state"] == "scheduled" and r["error"] == "try later" and r["attempts"] == 1
    assert 29 <= float(r["run_in"]) <= 30.5
    assert tq.claim() is None


def test_fail_retry_in_zero_is_claimable_at_once(tq: TaskQueue) -> None:
    tid = tq.enqueue("x", max_attempts=2)
    tq.fail(claim_one(tq), "again", retry_in=0)
    assert tq.get(tid).state == "queued"  # type: ignore[union-attr]
    second = claim_one(tq)
    assert second.id == tid and second.attempts == 2


def test_fail_default_backoff_around_one_second(tq: TaskQueue, dsn: str) -> None:
    tid = tq.enqueue("x", max_attempts=5)
    tq.fail(claim_one(tq), "boom")
    r = row(dsn, tid)
    assert r["state"] == "scheduled"
    assert 0.5 <= float(r["run_in"]) <= 1.5


def test_backoff_grows_exponentially_with_jitter_and_cap() -> None:
    rng = random.Random(7)
    means = [sum(backoff_seconds(n, rng=rng) for _ in range(200)) / 200 for n in range(1, 8)]
    for earlier, later in zip(means, means[1:]):
        assert 1.5 < later / earlier < 2.5
    first = {backoff_seconds(1, rng=rng) for _ in range(50)}
    assert len(first) > 1 and all(0.5 <= s <= 1.5 for s in first)  # jitter, around a second
    assert all(backoff_seconds(n, rng=rng) <= CAP_SECONDS for n in (20, 40, 1000))
    assert backoff_seconds(40, rng=rng) >= CAP_SECONDS * 0.5


def test_second_failure_waits_longer(tq: TaskQueue, dsn: str) -> None:
    tid = tq.enqueue("x", max_attempts=5)
    tq.fail(claim_one(tq), "first")
    with psycopg.connect(dsn) as conn:
        conn.execute("UPDATE taskqueue.tasks SET run_at = now() WHERE id = %s", (tid,))
    again = claim_one(tq)
    assert again.attempts == 2
    tq.fail(again, "second")
    r = row(dsn, tid)
    assert 1.4 <= float(r["run_in"]) <= 2.6


def test_fail_retry_false_fails_for_good(tq: TaskQueue) -> None:
    tid = tq.enqueue("x", max_attempts=5)
    tq.fail(claim_one(tq), ValueError("bad input"), retry=False)
    got = tq.get(tid)
    assert got is not None and got.state == "failed" and got.attempts == 1
    assert got.error is not None and "bad input" in got.error
    assert tq.claim() is None


def test_fail_without_attempts_left_fails(tq: TaskQueue) -> None:
    tid = tq.enqueue("x", max_attempts=2)
    tq.fail(claim_one(tq), "one", retry_in=0)
    tq.fail(claim_one(tq), "two", retry_in=0)
    got = tq.get(tid)
    assert got is not None and got.state == "failed" and got.error == "two" and got.attempts == 2
    assert tq.claim() is None


def test_max_attempts_one_counts_first_run(tq: TaskQueue) -> None:
    tid = tq.enqueue("x", max_attempts=1)
    tq.fail(claim_one(tq), "only try")
    assert tq.get(tid).state == "failed"  # type: ignore[union-attr]


def test_fail_releases_pool(tq: TaskQueue) -> None:
    tq.set_pool_limit("p", 1)
    tq.enqueue("x", pool="p", max_attempts=3)
    tq.fail(claim_one(tq), "again", retry_in=0)
    assert tq.pool("p") == Pool("p", 1, 0)
    assert claim_one(tq).pool == "p"


# -- rescue -------------------------------------------------------------------


def test_rescue_requeues_and_releases(tq: TaskQueue, dsn: str) -> None:
    tq.set_pool_limit("p", 2)
    ids = tq.enqueue_many([{"payload": i, "pool": "p"} for i in range(2)] + [{"payload": "free"}])
    held = tq.claim_many(limit=3)
    assert tq.rescue_expired() == 0
    expire(dsn, ids[0], ids[2])
    assert tq.rescue_expired() == 2
    assert tq.pool("p") == Pool("p", 2, 1)
    for tid in (ids[0], ids[2]):
        got = tq.get(tid)
        assert got is not None and got.state == "queued" and got.attempts == 1 and got.lease_expires_at is None
        assert got.error and "lease expired" in got.error
    assert tq.get(ids[1]).state == "running"  # type: ignore[union-attr]
    again = tq.claim_many(limit=5)
    assert sorted(t.id for t in again) == [ids[0], ids[2]]  # claimable again at once
    assert all(t.attempts == 2 for t in again)
    assert tq.rescue_expired() == 0
    assert len(held) == 3


def test_rescue_fails_when_attempts_used_up(tq: TaskQueue, dsn: str) -> None:
    tq.set_pool_limit("p", 1)
    tid = tq.enqueue("x", pool="p", max_attempts=1)
    claim_one(tq)
    expire(dsn, tid)
    assert tq.rescue_expired() == 1
    got = tq.get(tid)
    assert got is not None and got.state == "failed" and got.finished_at is not None
    assert tq.pool("p") == Pool("p", 1, 0)


def test_rescue_with_real_short_lease(tq: TaskQueue, dsn: str) -> None:
    tid = tq.enqueue("x")
    claim_one(tq, lease=0.05)
    with psycopg.connect(dsn) as conn:
        # Wait on the database clock until the lease is over.
        conn.execute(
            "SELECT pg_sleep(GREATEST(0, EXTRACT(EPOCH FROM lease_expires_at - clock_timestamp())) + 0.01)"
            " FROM taskqueue.tasks WHERE id = %s",
            (tid,),
        )
    assert tq.rescue_expired() == 1
    assert tq.get(tid).state == "queued"  # type: ignore[union-attr]


def test_rescue_of_cancel_requested_ends_cancelled(tq: TaskQueue, dsn: str) -> None:
    tid = tq.enqueue("x", max_attempts=3)
    claim_one(tq)
    assert tq.cancel(tid) is True
    expire(dsn, tid)
    assert tq.rescue_expired() == 1
    assert tq.get(tid).state == "cancelled"  # type: ignore[union-attr]


# -- release ------------------------------------------------------------------


def test_release_gives_back_without_using_attempt(tq: TaskQueue) -> None:
    tq.set_pool_limit("p", 1)
    tid = tq.enqueue("x", pool="p", max_attempts=1)
    task = claim_one(tq)
    tq.release(task)
    got = tq.get(tid)
    assert got is not None and got.state == "queued" and got.attempts == 0
    assert tq.pool("p") == Pool("p", 1, 0)
    with pytest.raises(LeaseLost):
        tq.release(task)
    assert claim_one(tq).attempts == 1


# -- cancel -------------------------------------------------------------------


def test_cancel_queued_and_scheduled(tq: TaskQueue) -> None:
    queued = tq.enqueue("q")
    scheduled = tq.enqueue("s", delay=600)
    assert tq.cancel(queued) is True
    assert tq.cancel(scheduled) is True
    assert tq.get(queued).state == "cancelled"  # type: ignore[union-attr]
    assert tq.get(scheduled).state == "cancelled"  # type: ignore[union-attr]
    assert tq.claim() is None
    assert tq.cancel(queued) is False  # already finished


def test_cancel_finished_and_unknown_return_false(tq: TaskQueue) -> None:
    done = tq.enqueue("d")
    tq.complete(claim_one(tq))
    failed = tq.enqueue("f")
    tq.fail(claim_one(tq), "x", retry=False)
    assert tq.cancel(done) is False and tq.get(done).state == "done"  # type: ignore[union-attr]
    assert tq.cancel(failed) is False and tq.get(failed).state == "failed"  # type: ignore[union-attr]
    assert tq.cancel(10**12) is False


def test_cancel_running_flow_with_complete(tq: TaskQueue) -> None:
    tq.set_pool_limit("p", 1)
    tid = tq.enqueue("x", pool="p")
    task = claim_one(tq)
    assert task.cancel_requested is False
    assert tq.cancel(tid) is True
    assert tq.get(tid).state == "running"  # type: ignore[union-attr]  # until the holder finishes
    assert tq.pool("p") == Pool("p", 1, 1)
    tq.heartbeat(task)
    assert task.cancel_requested is True  # seen on the next heartbeat
    tq.complete(task, "stopped early")
    got = tq.get(tid)
    assert got is not None and got.state == "cancelled"
    assert tq.pool("p") == Pool("p", 1, 0)
    with pytest.raises(LeaseLost):
        tq.complete(task)
    assert tq.cancel(tid) is False


def test_cancel_running_flow_with_fail(tq: TaskQueue) -> None:
    tq.set_pool_limit("p", 1)
    tid = tq.enqueue("x", pool="p", max_attempts=5)
    task = claim_one(tq)
    assert tq.cancel(tid) is True
    lost = tq.heartbeat_many([task])
    assert lost == [] and task.cancel_requested is True
    tq.fail(task, "interrupted")  # would retry, but the cancel wins
    assert tq.get(tid).state == "cancelled"  # type: ignore[union-attr]
    assert tq.pool("p") == Pool("p", 1, 0)
    assert tq.claim() is None
