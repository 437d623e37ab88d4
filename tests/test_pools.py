"""Pools: limits hold at every commit, counts are exact, full pools are skipped."""

from __future__ import annotations

import psycopg

from taskqueue import Pool, TaskQueue
from tests.support.apis import tq  # noqa: F401  (the contract runs against both APIs)


def running_in(dsn: str, pool: str) -> int:
    with psycopg.connect(dsn) as conn:
        row = conn.execute(
            "SELECT count(*) FROM taskqueue.tasks WHERE pool = %s AND state = 'running'", (pool,)
        ).fetchone()
    assert row is not None
    return int(row[0])


def test_limit_caps_running_tasks(tq: TaskQueue, dsn: str) -> None:
    tq.set_pool_limit("net", 2)
    tq.enqueue_many([{"payload": i, "pool": "net"} for i in range(5)])
    a, b = tq.claim(), tq.claim()
    assert a is not None and b is not None
    assert tq.claim() is None
    assert tq.pool("net") == Pool("net", 2, 2)
    assert running_in(dsn, "net") == 2
    tq.complete(a)
    assert tq.pool("net") == Pool("net", 2, 1)
    c = tq.claim()
    assert c is not None and c.pool == "net"
    assert tq.claim() is None


def test_claim_moves_past_full_pool(tq: TaskQueue) -> None:
    tq.set_pool_limit("busy", 1)
    first = tq.enqueue("busy 1", pool="busy", priority=0)
    tq.enqueue("busy 2", pool="busy", priority=0)
    tq.enqueue("busy 3", pool="busy", priority=0)
    free = tq.enqueue("free", pool="other", priority=1)
    plain = tq.enqueue("plain", priority=2)
    assert tq.claim().id == first  # type: ignore[union-attr]
    assert tq.claim().id == free  # type: ignore[union-attr]  # not None: other work fits
    assert tq.claim().id == plain  # type: ignore[union-attr]
    assert tq.claim() is None


def test_claim_many_respects_limits_across_one_call(tq: TaskQueue) -> None:
    tq.set_pool_limit("a", 2)
    tq.set_pool_limit("b", 1)
    tq.enqueue_many([{"payload": f"a{i}", "pool": "a"} for i in range(4)])
    tq.enqueue_many([{"payload": f"b{i}", "pool": "b"} for i in range(3)])
    tq.enqueue_many([{"payload": f"n{i}"} for i in range(2)])
    got = tq.claim_many(limit=100)
    pools = [t.pool for t in got]
    assert pools.count("a") == 2 and pools.count("b") == 1 and pools.count(None) == 2
    assert {p.name: p.running for p in tq.pools()} == {"a": 2, "b": 1}


def test_zero_limit_blocks_pool(tq: TaskQueue) -> None:
    tq.set_pool_limit("closed", 0)
    tq.enqueue("x", pool="closed")
    assert tq.claim() is None
    tq.set_pool_limit("closed", None)
    assert tq.claim() is not None


def test_pool_without_limit_is_unlimited(tq: TaskQueue) -> None:
    tq.enqueue_many([{"payload": i, "pool": "free"} for i in range(7)])
    assert len(tq.claim_many()) == 7
    assert tq.pool("free") == Pool("free", None, 7)


def test_pools_lists_pools_with_limit_or_running(tq: TaskQueue) -> None:
    tq.enqueue("idle, no limit", pool="idle")
    tq.enqueue("will run", pool="runs")
    tq.set_pool_limit("limited", 3)
    assert [p.name for p in tq.pools()] == ["limited"]
    task = tq.claim(queues=["default"])
    assert task is not None
    listed = {p.name: p for p in tq.pools()}
    assert set(listed) == {"limited", task.pool}
    assert listed["limited"] == Pool("limited", 3, 0)
    assert listed[task.pool].running == 1 and listed[task.pool].limit is None  # type: ignore[index]
    tq.complete(task)
    assert [p.name for p in tq.pools()] == ["limited"]
    tq.set_pool_limit("limited", None)
    assert tq.pools() == []
    assert tq.pool("idle") == Pool("idle", None, 0)
    assert tq.pool("never-seen") is None


def test_lowering_limit_below_running_blocks_until_count_drops(tq: TaskQueue) -> None:
    tq.set_pool_limit("p", 3)
    tq.enqueue_many([{"payload": i, "pool": "p"} for i in range(6)])
    held = tq.claim_many(limit=10)
    assert len(held) == 3
    tq.set_pool_limit("p", 1)
    assert tq.pool("p") == Pool("p", 1, 3)  # running tasks keep running
    assert tq.claim() is None
    tq.complete(held[0])
    assert tq.claim() is None  # 2 running, limit 1
    tq.fail(held[1], "boom", retry=False)
    assert tq.claim() is None  # 1 running, limit 1
    tq.complete(held[2])
    again = tq.claim()
    assert again is not None and again.pool == "p"
    assert tq.claim() is None
    assert tq.pool("p") == Pool("p", 1, 1)


def test_raising_limit_admits_more(tq: TaskQueue) -> None:
    tq.set_pool_limit("p", 1)
    tq.enqueue_many([{"payload": i, "pool": "p"} for i in range(3)])
    assert tq.claim() is not None and tq.claim() is None
    tq.set_pool_limit("p", 3)
    assert len(tq.claim_many()) == 2
    assert tq.pool("p").running == 3  # type: ignore[union-attr]


def test_every_transition_keeps_count_exact(tq: TaskQueue, dsn: str) -> None:
    tq.set_pool_limit("p", 10)
    tq.enqueue_many([{"payload": i, "pool": "p", "max_attempts": 2} for i in range(6)])
    t = tq.claim_many(limit=6)
    assert tq.pool("p").running == 6 == running_in(dsn, "p")  # type: ignore[union-attr]
    tq.complete(t[0])
    tq.fail(t[1], "retry me", retry_in=0)
    tq.fail(t[2], "dead", retry=False)
    tq.cancel(t[3].id)
    tq.complete(t[3])  # ends cancelled
    tq.release(t[4])
    assert tq.pool("p").running == 1 == running_in(dsn, "p")  # type: ignore[union-attr]
    with psycopg.connect(dsn) as conn:
        conn.execute(
            "UPDATE taskqueue.tasks SET lease_expires_at = now() - interval '1 second' WHERE id = %s", (t[5].id,)
        )
    assert tq.rescue_expired() == 1
    assert tq.pool("p").running == 0 == running_in(dsn, "p")  # type: ignore[union-attr]


def test_count_check_constraint_rejects_negative(tq: TaskQueue, dsn: str) -> None:
    tq.set_pool_limit("p", 1)
    with psycopg.connect(dsn) as conn:
        try:
            conn.execute("UPDATE taskqueue.pools SET running = -1 WHERE name = 'p'")
        except psycopg.errors.CheckViolation:
            pass
        else:  # pragma: no cover
            raise AssertionError("a negative running count was accepted")


def test_pool_limit_held_under_concurrent_threads(tq: TaskQueue, dsn: str) -> None:
    import threading

    for name in ("n1", "n2", "n3"):
        tq.set_pool_limit(name, 2)
    tq.enqueue_many([{"payload": i, "pool": f"n{1 + i % 3}"} for i in range(60)])
    barrier = threading.Barrier(6)
    claimed: list[str] = []
    lock = threading.Lock()

    def run() -> None:
        barrier.wait()
        for _ in range(10):
            t = tq.claim()
            if t is not None:
                with lock:
                    claimed.append(t.pool)  # type: ignore[arg-type]

    threads = [threading.Thread(target=run) for _ in range(6)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert sorted(claimed) == ["n1", "n1", "n2", "n2", "n3", "n3"]
    for name in ("n1", "n2", "n3"):
        assert tq.pool(name) == Pool(name, 2, 2)
        assert running_in(dsn, name) == 2


def _wait_until_blocked_by(dsn: str, holder: psycopg.Connection, done: object = None) -> None:
    """Block until one of the queue's connections waits on ``holder`` (polled on the DB),
    or until the thread ``done`` has finished."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        for _ in range(1000):
            if done is not None and not done.is_alive():  # type: ignore[attr-defined]
                return
            n = conn.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
                " AND application_name = 'taskqueue' AND %s = ANY (pg_blocking_pids(pid))",
                (holder.info.backend_pid,),
            ).fetchone()[0]  # type: ignore[index]
            if n:
                return
            conn.execute("SELECT pg_sleep(0.01)")
    raise AssertionError("the claim never waited on the expected lock")


def test_claim_holds_no_second_pool_lock_after_a_pool_fills(tq: TaskQueue, dsn: str) -> None:
    """A claim that waited on a pool and found it full keeps that row locked (PostgreSQL
    re-checks under the lock); it must then not wait on a second pool, or it can deadlock."""
    import threading

    tq.set_pool_limit("p1", 5)
    tq.set_pool_limit("p2", 5)
    tq.enqueue("in p1", pool="p1")
    tq.enqueue("in p2", pool="p2")
    plain = tq.enqueue("no pool", priority=1)
    lowering = psycopg.connect(dsn)
    other = psycopg.connect(dsn)
    try:
        lowering.execute("UPDATE taskqueue.pools SET running_limit = 0 WHERE name = 'p1'")
        result: list[object] = []
        claimer = threading.Thread(target=lambda: result.append(tq.claim()))
        claimer.start()
        _wait_until_blocked_by(dsn, lowering)  # the claim waits on p1
        other.execute("SELECT name FROM taskqueue.pools WHERE name = 'p2' FOR UPDATE")
        lowering.commit()  # p1 is now full: the claim moves on, still holding p1's row
        _wait_until_blocked_by(dsn, other, claimer)  # the claim ends, or waits on p2 (the bug)
        other.execute("SET lock_timeout = '3s'")
        # Locking p1 while holding p2 must not wait on the claim.
        other.execute("UPDATE taskqueue.pools SET running_limit = running_limit WHERE name = 'p1'")
        other.commit()
        claimer.join(10)
        assert not claimer.is_alive()
        got = result[0]
        assert got is not None and got.id == plain  # p1 full, p2 busy: the task without a pool
    finally:
        lowering.close()
        other.close()


def test_ends_of_a_claim_wake_workers_only_when_something_became_claimable(tq: TaskQueue, dsn: str) -> None:
    """complete/fail/release send their wake-up in their own statement (one round trip, one commit):
    when they free a full pool's slot or queue the task again, and not otherwise."""
    import psycopg

    from taskqueue.db import LISTEN_CONNECT_ARGS, listen

    with psycopg.connect(dsn, **LISTEN_CONNECT_ARGS) as conn:
        listen(conn, tq.channel)

        def woken() -> int:
            return sum(1 for _ in conn.notifies(timeout=0.3))

        tq.set_pool_limit("tight", 1)
        tq.enqueue_many([{"payload": {}, "pool": "tight"}, {"payload": {}, "pool": "roomy"}, {"payload": {}}])
        woken()  # the enqueue's own
        tight = tq.claim(available=None)
        roomy = tq.claim(available=None)
        plain = tq.claim(available=None)
        assert tight is not None and roomy is not None and plain is not None and tight.pool == "tight"
        assert woken() == 0
        tq.complete(roomy)  # its pool has no limit: nothing became claimable
        tq.fail(plain, "boom", retry=False)  # failed for good
        assert woken() == 0
        tq.complete(tight)  # the full pool has a free slot
        assert woken() == 1
        again = tq.enqueue({}, max_attempts=3)
        woken()
        task = tq.claim(available=None)
        assert task is not None and task.id == again
        tq.fail(task, "try again", retry_in=0)  # queued again at once
        assert woken() == 1
        task = tq.claim(available=None)
        assert task is not None
        tq.release(task)
        assert woken() == 1
