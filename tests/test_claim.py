"""The resource-fit claim: order, fit, queues, claim_many packing, peek."""

from __future__ import annotations

import threading

import psycopg
import pytest

from taskqueue import Task, TaskQueue
from tests.support.apis import tq  # noqa: F401  (the contract runs against both APIs)


def test_lower_priority_number_first_then_fifo(tq: TaskQueue) -> None:
    a = tq.enqueue("a", priority=5)
    b = tq.enqueue("b", priority=-3)
    c = tq.enqueue("c", priority=5)
    d = tq.enqueue("d", priority=-3)
    order = [tq.claim().id for _ in range(4)]  # type: ignore[union-attr]
    assert order == [b, d, a, c]
    assert tq.claim() is None


def test_order_max_takes_largest_priority_then_smallest_id(tq: TaskQueue) -> None:
    a = tq.enqueue("a", priority=1)
    b = tq.enqueue("b", priority=9)
    c = tq.enqueue("c", priority=9)
    d = tq.enqueue("d", priority=-2**31)
    e = tq.enqueue("e", priority=2**31 - 1)
    order = [tq.claim(order="max").id for _ in range(5)]  # type: ignore[union-attr]
    assert order == [e, b, c, a, d]


def test_extreme_priorities_are_claimable(tq: TaskQueue) -> None:
    lo = tq.enqueue("lo", priority=-(2**31))
    hi = tq.enqueue("hi", priority=2**31 - 1)
    assert tq.claim().id == lo  # type: ignore[union-attr]
    assert tq.claim().id == hi  # type: ignore[union-attr]


def test_task_has_public_fields(tq: TaskQueue) -> None:
    tq.enqueue({"k": 1}, priority=2, required=3, pool="p", queue="q")
    task = tq.claim()
    assert task is not None
    for name in (
        "id", "queue", "payload", "priority", "required", "pool", "state", "attempts",
        "max_attempts", "run_at", "created_at", "worker", "lease_expires_at", "result", "error",
    ):
        assert hasattr(task, name), name
    assert (task.queue, task.payload, task.priority, task.required, task.pool) == ("q", {"k": 1}, 2, 3, "p")
    assert task.result is None and task.error is None and task.run_at <= task.lease_expires_at  # type: ignore[operator]


def test_claim_sets_lease_fields(tq: TaskQueue) -> None:
    tid = tq.enqueue({"k": "v"}, max_attempts=4)
    task = tq.claim(worker="w-1", lease=30)
    assert task is not None and task.id == tid
    assert task.state == "running" and task.attempts == 1 and task.max_attempts == 4
    assert task.worker == "w-1" and task.payload == {"k": "v"}
    assert task.lease_token is not None
    assert task.lease_expires_at is not None and task.started_at is not None
    span = (task.lease_expires_at - task.started_at).total_seconds()
    assert 29.9 <= span <= 30.1
    stored = tq.get(tid)
    assert stored is not None and stored.state == "running" and stored.worker == "w-1"


def test_a_claimed_task_reads_every_field_as_get_does(tq: TaskQueue) -> None:
    # The claim's rows become Task(*row): a column out of order would put a
    # value in the wrong field, which this comparison with get() would show.
    tid = tq.enqueue({"k": [1, 2]}, queue="q", priority=-3, required=2, pool="p", max_attempts=5,
                     dedupe_key="d", estimate=1.5)
    task = tq.claim(worker="w-2", lease=40)
    stored = tq.get(tid)
    assert task is not None and stored is not None
    assert isinstance(task.lease_token, str) and len(task.lease_token) == 36
    assert (task.estimate, task.lease_seconds, task.dedupe_key, task.pool) == (1.5, 40.0, "d", "p")
    for name in Task.__dataclass_fields__:
        if name != "lease_token":  # get() is not a claim: it carries no handle
            assert getattr(task, name) == getattr(stored, name), name


def test_fit_takes_oldest_task_that_fits_within_priority(tq: TaskQueue) -> None:
    big = tq.enqueue("big", required=8)
    mid = tq.enqueue("mid", required=4)
    small = tq.enqueue("small", required=1)
    assert tq.claim(available=5).id == mid  # type: ignore[union-attr]
    assert tq.claim(available=5).id == small  # type: ignore[union-attr]
    assert tq.claim(available=5) is None
    assert tq.claim(available=8).id == big  # type: ignore[union-attr]


def test_fit_prefers_priority_over_size(tq: TaskQueue) -> None:
    tq.enqueue("too big, better priority", priority=0, required=10)
    worse = tq.enqueue("fits, worse priority", priority=7, required=2)
    better_small = tq.enqueue("fits, same priority later", priority=0, required=0)
    assert tq.claim(available=3).id == better_small  # type: ignore[union-attr]
    assert tq.claim(available=3).id == worse  # type: ignore[union-attr]


def test_available_none_ignores_required_and_zero_fits_zero(tq: TaskQueue) -> None:
    huge = tq.enqueue("huge", required=2**31 - 1)
    zero = tq.enqueue("zero", required=0)
    assert tq.claim(available=0).id == zero  # type: ignore[union-attr]
    assert tq.claim(available=0) is None
    assert tq.claim().id == huge  # type: ignore[union-attr]


def test_seed_000_worst_case_only_last_fits(tq: TaskQueue, dsn: str) -> None:
    with psycopg.connect(dsn) as conn:
        conn.execute(
            "INSERT INTO taskqueue.tasks (queue, payload, priority, required, state, max_attempts) "
            "SELECT 'default', '{}'::jsonb, (g % 7), 50 + (g % 13), 'queued', 3 FROM generate_series(1, 5000) g"
        )
    last = tq.enqueue("the only one that fits", priority=6, required=3)
    assert tq.peek(available=3).id == last  # type: ignore[union-attr]
    task = tq.claim(available=3)
    assert task is not None and task.id == last
    assert tq.claim(available=49) is None
    nxt = tq.claim(available=50)
    assert nxt is not None and nxt.required == 50 and nxt.priority == 0


def test_queues_filter(tq: TaskQueue) -> None:
    a = tq.enqueue("a", queue="alpha", priority=5)
    b = tq.enqueue("b", queue="beta", priority=1)
    g = tq.enqueue("g", queue="gamma", priority=0)
    assert tq.claim(queues=["alpha", "beta"]).id == b  # type: ignore[union-attr]
    assert tq.claim(queues=["alpha"]).id == a  # type: ignore[union-attr]
    assert tq.claim(queues=["alpha", "beta"]) is None
    assert tq.claim(queues=["nope"]) is None
    assert tq.claim().id == g  # type: ignore[union-attr]


def test_queues_none_takes_best_across_queues(tq: TaskQueue) -> None:
    ids = {q: tq.enqueue(q, queue=q, priority=p) for q, p in (("q1", 3), ("q2", 1), ("q3", 2), ("q4", 1))}
    got = [tq.claim().id for _ in range(4)]  # type: ignore[union-attr]
    assert got == [ids["q2"], ids["q4"], ids["q3"], ids["q1"]]


def test_claim_many_packs_in_order(tq: TaskQueue) -> None:
    a = tq.enqueue("a", required=3)
    tq.enqueue("b", required=5)  # does not fit after a
    c = tq.enqueue("c", required=2)
    d = tq.enqueue("d", required=0)
    tq.enqueue("e", required=1)  # fits in what is left... but limit stops first
    tasks = tq.claim_many(available=5, limit=3)
    assert [t.id for t in tasks] == [a, c, d]
    assert sum(t.required for t in tasks) <= 5
    assert all(t.state == "running" and t.lease_token for t in tasks)
    assert len({t.lease_token for t in tasks}) == 3


def test_claim_many_walks_priorities(tq: TaskQueue) -> None:
    p0 = tq.enqueue("p0", priority=0, required=4)
    tq.enqueue("p0-big", priority=0, required=9)
    p1 = tq.enqueue("p1", priority=1, required=3)
    tq.enqueue("p2", priority=2, required=2)
    p3 = tq.enqueue("p3", priority=3, required=0)
    tasks = tq.claim_many(available=7)
    assert [t.id for t in tasks] == [p0, p1, p3]


def test_claim_many_without_available_respects_limit(tq: TaskQueue) -> None:
    ids = tq.enqueue_many([{"payload": i, "priority": -i} for i in range(10)])
    tasks = tq.claim_many(limit=4)
    assert [t.id for t in tasks] == list(reversed(ids))[:4]
    assert len(tq.claim_many(limit=100)) == 6
    assert tq.claim_many() == []


def test_claim_many_respects_queues_and_order_max(tq: TaskQueue) -> None:
    a = tq.enqueue("a", queue="x", priority=1)
    b = tq.enqueue("b", queue="x", priority=5)
    tq.enqueue("c", queue="y", priority=9)
    tasks = tq.claim_many(queues=["x"], order="max")
    assert [t.id for t in tasks] == [b, a]


def test_peek_equals_claim(tq: TaskQueue) -> None:
    tq.enqueue("big", priority=0, required=9)
    tq.enqueue("pooled", priority=0, pool="full")
    tq.set_pool_limit("full", 0)
    tq.enqueue("other q", queue="other", priority=-5)
    tq.enqueue("x", priority=2, required=1)
    tq.enqueue("y", priority=2, required=2)
    tq.enqueue("z", priority=4)
    for kwargs in (
        {"available": 2, "queues": ["default"]},
        {"available": 1, "queues": ["default"], "order": "max"},
        {"available": 5},
        {},
        {"order": "max"},
    ):
        seen = tq.peek(**kwargs)  # type: ignore[arg-type]
        again = tq.peek(**kwargs)  # type: ignore[arg-type]
        assert seen is not None and again is not None and seen.id == again.id
        assert seen.state == "queued" and seen.attempts == 0  # peek changed nothing
        claimed = tq.claim(**kwargs)  # type: ignore[arg-type]
        assert claimed is not None and claimed.id == seen.id
    assert tq.peek(available=0) is None
    assert tq.claim(available=0) is None


def test_peek_leaves_pool_counts_alone(tq: TaskQueue) -> None:
    tq.set_pool_limit("p", 1)
    tid = tq.enqueue("t", pool="p")
    assert tq.peek().id == tid  # type: ignore[union-attr]
    assert tq.pool("p").running == 0  # type: ignore[union-attr]
    assert tq.claim().id == tid  # type: ignore[union-attr]
    assert tq.pool("p").running == 1  # type: ignore[union-attr]


def test_claim_skips_rows_locked_by_another_claim(tq: TaskQueue, dsn: str) -> None:
    first = tq.enqueue("first")
    second = tq.enqueue("second")
    with psycopg.connect(dsn) as conn:
        conn.execute("SELECT id FROM taskqueue.tasks WHERE id = %s FOR UPDATE", (first,))
        got = tq.claim()
        assert got is not None and got.id == second
    assert tq.claim().id == first  # type: ignore[union-attr]


def test_concurrent_threads_never_share_a_task(tq: TaskQueue) -> None:
    tq.enqueue_many([{"payload": i, "required": i % 3} for i in range(200)])
    seen: list[int] = []
    lock = threading.Lock()
    barrier = threading.Barrier(4)

    def run() -> None:
        barrier.wait()
        while True:
            got = tq.claim_many(available=4, limit=3)
            if not got:
                return
            with lock:
                seen.extend(t.id for t in got)

    threads = [threading.Thread(target=run) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(seen) == 200 and len(set(seen)) == 200


@pytest.mark.parametrize("order", ["min", "max"])
def test_scheduled_task_not_claimable_until_due(tq: TaskQueue, dsn: str, order: str) -> None:
    later = tq.enqueue("later", delay=3600)
    assert tq.get(later).state == "scheduled"  # type: ignore[union-attr]
    assert tq.claim(order=order) is None
    with psycopg.connect(dsn) as conn:
        conn.execute("UPDATE taskqueue.tasks SET run_at = now() - interval '1 second' WHERE id = %s", (later,))
    assert tq.get(later).state == "queued"  # type: ignore[union-attr]
    assert tq.claim(order=order).id == later  # type: ignore[union-attr]


def test_claim_many_interleaves_queues_by_id(tq: TaskQueue) -> None:
    ids = tq.enqueue_many([{"payload": i, "queue": f"q{i % 3}", "required": i % 2} for i in range(9)])
    tasks = tq.claim_many(limit=5)
    assert [t.id for t in tasks] == ids[:5]
    packed = tq.claim_many(available=1, limit=10)
    # ids[5] (required 1) uses up the room; then only required-0 tasks still fit.
    assert [t.id for t in packed] == [ids[5], ids[6], ids[8]]


def test_a_burst_of_due_tasks_is_promoted_in_one_pass(tq: TaskQueue, dsn: str) -> None:
    """claim_tasks v23: each due task's entry in ix_tasks_scheduled is read once, not once per batch.

    Version 22 promoted 1,000 at a time, each batch from the start of the
    index, stepping over the entries of the rows its earlier batches had
    promoted: 5,000 due tasks cost 40,005 entries read, and a burst of N
    quadratic time (154 s for the first claim after 1,000,000, 57 s now).
    """
    n = 5000
    with psycopg.connect(dsn) as conn:
        conn.execute(
            "INSERT INTO taskqueue.tasks (queue, payload, priority, required, state, max_attempts, run_at) "
            "SELECT 'default', '{}'::jsonb, g %% 10, 0, 'scheduled', 3, now() - interval '1 minute'"
            " FROM generate_series(1, %s) g",
            (n,),
        )
        conn.commit()
        conn.execute("SELECT set_config('search_path', 'taskqueue', false)")
        got = conn.execute("SELECT id, priority FROM claim_tasks(NULL, 1, NULL, 'burst', 60, false)").fetchone()
        read = conn.execute("SELECT pg_stat_get_xact_tuples_returned('ix_tasks_scheduled'::regclass)").fetchone()
        queued = conn.execute("SELECT count(*) FROM tasks WHERE state = 'queued'").fetchone()
        conn.rollback()
    assert got is not None and got[1] == 0
    assert queued is not None and queued[0] == n - 1  # every due task promoted, one of them claimed
    assert read is not None and n <= read[0] <= n + 10, f"{read[0]} index entries read to promote {n} tasks"


def test_many_due_scheduled_tasks_do_not_hide_a_better_priority(tq: TaskQueue, dsn: str) -> None:
    # A burst of due retries must not push a better-priority due task out of reach.
    with psycopg.connect(dsn) as conn:
        conn.execute(
            "INSERT INTO taskqueue.tasks (queue, payload, priority, required, state, max_attempts, run_at) "
            "SELECT 'default', '{}'::jsonb, 5, 0, 'scheduled', 3, now() - interval '1 hour' + g * interval '1 ms'"
            " FROM generate_series(1, 2500) g"
        )
        best = conn.execute(
            "INSERT INTO taskqueue.tasks (queue, payload, priority, required, state, max_attempts, run_at) "
            "VALUES ('default', '\"urgent\"', 0, 0, 'scheduled', 3, now() - interval '1 second') RETURNING id"
        ).fetchone()[0]  # type: ignore[index]
    assert tq.peek().id == best  # type: ignore[union-attr]
    assert tq.claim().id == best  # type: ignore[union-attr]
