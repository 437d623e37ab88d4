"""Enqueue: delays, dedupe, batches, transactional enqueue, one NOTIFY per transaction."""

from __future__ import annotations

import datetime as dt
import threading
import time
from collections.abc import Iterator

import psycopg
import pytest
import sqlalchemy as sa
from sqlalchemy.orm import Session

from taskqueue import TaskQueue, ValidationError
from taskqueue.db import listen
from taskqueue.dsn import to_sqlalchemy_url
from tests.support.apis import tq  # noqa: F401  (the contract runs against both APIs)


def count_tasks(dsn: str) -> int:
    with psycopg.connect(dsn) as conn:
        return int(conn.execute("SELECT count(*) FROM taskqueue.tasks").fetchone()[0])  # type: ignore[index]


@pytest.fixture
def listener(tq: TaskQueue) -> Iterator[psycopg.Connection]:
    conn = psycopg.connect(tq.dsn, autocommit=True)
    listen(conn, tq.channel)
    try:
        yield conn
    finally:
        conn.close()


def drain(conn: psycopg.Connection, timeout: float = 0.3) -> int:
    """How many notifications arrived; waits up to ``timeout`` for the first."""
    return sum(1 for _ in conn.notifies(timeout=timeout))


@pytest.fixture
def user_engine(dsn: str) -> Iterator[sa.Engine]:
    """The application's own engine, with its own (default) search_path."""
    engine = sa.create_engine(to_sqlalchemy_url(dsn), poolclass=sa.NullPool)
    with engine.begin() as conn:
        conn.execute(sa.text("CREATE TABLE app_orders (id serial PRIMARY KEY, note text)"))
    yield engine
    engine.dispose()


# -- plain enqueue and delays -----------------------------------------------


def test_enqueue_returns_increasing_ids_and_defaults(tq: TaskQueue) -> None:
    a = tq.enqueue({"n": 1})
    b = tq.enqueue({"n": 2})
    assert b > a
    got = tq.get(a)
    assert got is not None
    assert (got.queue, got.priority, got.required, got.pool, got.state) == ("default", 0, 0, None, "queued")
    assert (got.attempts, got.max_attempts, got.worker, got.result, got.error) == (0, 3, None, None, None)
    assert got.created_at.tzinfo is not None and got.run_at <= dt.datetime.now(dt.timezone.utc) + dt.timedelta(1)


def test_delay_makes_task_scheduled(tq: TaskQueue, dsn: str) -> None:
    tid = tq.enqueue("later", delay=120)
    got = tq.get(tid)
    assert got is not None and got.state == "scheduled"
    with psycopg.connect(dsn) as conn:
        run_in = conn.execute(
            "SELECT EXTRACT(EPOCH FROM run_at - created_at) FROM taskqueue.tasks WHERE id = %s", (tid,)
        ).fetchone()[0]  # type: ignore[index]
    assert 119.9 <= float(run_in) <= 120.1
    assert tq.claim() is None
    assert 100 < (tq.next_run_in() or 0) <= 120


def test_zero_delay_and_past_run_at_are_queued(tq: TaskQueue) -> None:
    a = tq.enqueue("now", delay=0)
    b = tq.enqueue("past", run_at=dt.datetime(2000, 1, 1, tzinfo=dt.timezone.utc))
    assert tq.get(a).state == "queued"  # type: ignore[union-attr]
    assert tq.get(b).state == "queued"  # type: ignore[union-attr]
    assert {tq.claim().id, tq.claim().id} == {a, b}  # type: ignore[union-attr]


def test_run_at_in_any_timezone(tq: TaskQueue) -> None:
    tz = dt.timezone(dt.timedelta(hours=-7))
    when = dt.datetime.now(tz) + dt.timedelta(hours=2)
    tid = tq.enqueue("later", run_at=when)
    got = tq.get(tid)
    assert got is not None and got.state == "scheduled"
    assert abs((got.run_at - when).total_seconds()) < 0.001


def test_short_delay_becomes_claimable_without_other_process(tq: TaskQueue, dsn: str) -> None:
    tid = tq.enqueue("soon", delay=0.2)
    assert tq.claim() is None
    with psycopg.connect(dsn) as conn:
        conn.execute(
            "SELECT pg_sleep(GREATEST(0, EXTRACT(EPOCH FROM run_at - clock_timestamp())) + 0.01)"
            " FROM taskqueue.tasks WHERE id = %s",
            (tid,),
        )
    task = tq.claim()
    assert task is not None and task.id == tid


# -- dedupe -----------------------------------------------------------------


def test_dedupe_returns_existing_id_and_writes_nothing(tq: TaskQueue, dsn: str) -> None:
    a = tq.enqueue({"v": 1}, dedupe_key="k")
    b = tq.enqueue({"v": 2}, dedupe_key="k", priority=5)
    assert a == b
    assert count_tasks(dsn) == 1
    assert tq.get(a).payload == {"v": 1}  # type: ignore[union-attr]


def test_dedupe_is_per_queue(tq: TaskQueue, dsn: str) -> None:
    a = tq.enqueue("x", dedupe_key="k", queue="one")
    b = tq.enqueue("x", dedupe_key="k", queue="two")
    assert a != b and count_tasks(dsn) == 2


def test_dedupe_holds_while_scheduled_and_running(tq: TaskQueue) -> None:
    s = tq.enqueue("s", dedupe_key="sched", delay=600)
    assert tq.enqueue("s2", dedupe_key="sched") == s
    r = tq.enqueue("r", dedupe_key="run")
    task = tq.claim()
    assert task is not None and task.id == r
    assert tq.enqueue("r2", dedupe_key="run") == r


@pytest.mark.parametrize("finish", ["complete", "fail", "cancel"])
def test_dedupe_key_freed_after_finish(tq: TaskQueue, finish: str) -> None:
    first = tq.enqueue("x", dedupe_key="k", max_attempts=1)
    if finish == "cancel":
        assert tq.cancel(first)
    else:
        task = tq.claim()
        assert task is not None
        if finish == "complete":
            tq.complete(task)
        else:
            tq.fail(task, "boom")
    second = tq.enqueue("x", dedupe_key="k")
    assert second != first
    assert tq.get(second).state == "queued"  # type: ignore[union-attr]
    assert tq.enqueue("y", dedupe_key="k") == second


def test_dedupe_within_a_batch(tq: TaskQueue, dsn: str) -> None:
    existing = tq.enqueue("old", dedupe_key="held")
    ids = tq.enqueue_many(
        [
            {"payload": 1, "dedupe_key": "a"},
            {"payload": 2},
            {"payload": 3, "dedupe_key": "a"},
            {"payload": 4, "dedupe_key": "a", "queue": "other"},
            {"payload": 5, "dedupe_key": "held"},
            {"payload": 6},
        ]
    )
    assert ids[0] == ids[2]
    assert ids[3] not in (ids[0],)
    assert ids[4] == existing
    assert len(set(ids)) == 5 and count_tasks(dsn) == 5
    assert ids[1] < ids[5]
    assert tq.get(ids[0]).payload == 1  # type: ignore[union-attr]  # the first spec wins


def test_concurrent_enqueues_with_one_key_insert_once(dsn: str) -> None:
    queues = [TaskQueue(dsn) for _ in range(8)]
    barrier = threading.Barrier(len(queues))
    results: list[int] = []
    lock = threading.Lock()

    def run(q: TaskQueue) -> None:
        barrier.wait()
        for i in range(20):
            tid = q.enqueue({"i": i}, dedupe_key=f"key-{i}")
            with lock:
                results.append(tid)

    threads = [threading.Thread(target=run, args=(q,)) for q in queues]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for q in queues:
        q.close()
    assert count_tasks(dsn) == 20
    assert len(set(results)) == 20 and len(results) == 160


def test_concurrent_batches_with_shared_keys_insert_once(dsn: str) -> None:
    queues = [TaskQueue(dsn) for _ in range(4)]
    barrier = threading.Barrier(len(queues))
    out: list[list[int]] = []
    lock = threading.Lock()

    def run(q: TaskQueue) -> None:
        barrier.wait()
        ids = q.enqueue_many([{"payload": i, "dedupe_key": f"k{i}"} for i in range(50)])
        with lock:
            out.append(ids)

    threads = [threading.Thread(target=run, args=(q,)) for q in queues]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for q in queues:
        q.close()
    assert count_tasks(dsn) == 50
    assert all(ids == out[0] for ids in out)


# -- enqueue_many -----------------------------------------------------------


def test_enqueue_many_returns_ids_in_order(tq: TaskQueue) -> None:
    specs = [
        {"payload": {"i": i}, "priority": 10 - i, "required": i, "pool": f"p{i % 2}", "queue": f"q{i % 3}"}
        for i in range(10)
    ]
    ids = tq.enqueue_many(specs)
    assert ids == sorted(ids) and len(set(ids)) == 10
    for spec, tid in zip(specs, ids):
        got = tq.get(tid)
        assert got is not None
        assert (got.payload, got.priority, got.required, got.pool, got.queue) == (
            spec["payload"], spec["priority"], spec["required"], spec["pool"], spec["queue"],
        )
    assert tq.enqueue_many([]) == []


def test_enqueue_many_with_delays(tq: TaskQueue) -> None:
    ids = tq.enqueue_many(
        [
            {"payload": 1, "delay": 300},
            {"payload": 2, "run_at": dt.datetime.now(dt.timezone.utc) + dt.timedelta(hours=1)},
            {"payload": 3},
        ]
    )
    assert [tq.get(i).state for i in ids] == ["scheduled", "scheduled", "queued"]  # type: ignore[union-attr]


TRICKY_PAYLOADS: list[object] = [
    "tab\tnewline\ncarriage\rback\\slash",
    "\\N",  # COPY's NULL marker, as text
    {"quote": "'\"", "unicode": "ünïcødé 🚀 中文", "empty": ""},
    [None, True, False, 0, -1, 1.5, "x" * 10_000],
    None,
]


def test_enqueue_many_copy_round_trips_every_character(tq: TaskQueue) -> None:
    ids = tq.enqueue_many([{"payload": p, "queue": "q\\x", "pool": "p\\ool"} for p in TRICKY_PAYLOADS])
    got = [tq.get(i) for i in ids]
    assert [t.payload for t in got] == [list(p) if isinstance(p, tuple) else p for p in TRICKY_PAYLOADS]  # type: ignore[union-attr]
    assert {(t.queue, t.pool) for t in got} == {("q\\x", "p\\ool")}  # type: ignore[union-attr]
    assert tq.pool("p\\ool") is not None


def test_enqueue_many_times_come_from_the_database_clock(tq: TaskQueue, dsn: str) -> None:
    past = dt.datetime(2000, 1, 1, tzinfo=dt.timezone.utc)
    ids = tq.enqueue_many(
        [{"payload": 0}, {"payload": 1, "delay": 0}, {"payload": 2, "delay": 3600}, {"payload": 3, "run_at": past}]
    )
    with psycopg.connect(dsn) as conn:
        rows = conn.execute(
            "SELECT id, state, run_at - created_at, run_at FROM taskqueue.tasks WHERE id = ANY(%s) ORDER BY id", (ids,)
        ).fetchall()
    assert [r[0] for r in rows] == ids
    assert [r[1] for r in rows] == ["queued", "queued", "scheduled", "queued"]
    # created_at is the transaction's now(); run_at is that same instant plus the delay.
    assert [r[2] for r in rows[:3]] == [dt.timedelta(0), dt.timedelta(0), dt.timedelta(hours=1)]
    assert rows[3][3] == past


def test_enqueue_many_ids_are_fifo_across_concurrent_batches(dsn: str) -> None:
    """Each batch's ids ascend in input order even while other batches draw ids."""
    results: list[list[int]] = []

    def one(k: int) -> None:
        with TaskQueue(dsn) as queue:
            for _ in range(5):
                results.append(queue.enqueue_many([{"payload": [k, i]} for i in range(500)]))

    threads = [threading.Thread(target=one, args=(k,)) for k in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(results) == 15
    for ids in results:
        assert ids == sorted(ids) and len(set(ids)) == 500
    with psycopg.connect(dsn) as conn:
        pairs = conn.execute("SELECT id, payload FROM taskqueue.tasks ORDER BY id").fetchall()
    assert len(pairs) == 7500
    by_batch: dict[int, list[int]] = {}
    for _, payload in pairs:
        by_batch.setdefault(payload[0], []).append(payload[1])
    for seq in by_batch.values():  # within one producer, input order is id order
        runs = [seq[i:i + 500] for i in range(0, len(seq), 500)]
        assert all(run == list(range(500)) for run in runs)


@pytest.mark.sync_api("kills the sync engine's pooled sessions; the async pool's twin is in test_async_api.py")
def test_pooled_connection_killed_while_idle_is_replaced(tq: TaskQueue, dsn: str) -> None:
    """The checkout check notices a session the server ended, with no ping round trip."""
    tq.enqueue("warm")
    with psycopg.connect(dsn, autocommit=True) as admin:
        killed = admin.execute(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity"
            " WHERE application_name = 'taskqueue' AND datname = current_database() AND pid <> pg_backend_pid()"
        ).fetchone()[0]  # type: ignore[index]
    assert killed >= 1
    # The server's message and EOF reach the socket asynchronously.
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        with psycopg.connect(dsn) as probe:
            left = probe.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'taskqueue'"
                " AND datname = current_database()"
            ).fetchone()[0]  # type: ignore[index]
        if left == 0:
            break
        time.sleep(0.01)
    tid = tq.enqueue("after the kill")
    assert tq.get(tid) is not None
    assert tq.enqueue_many([{"payload": 1}, {"payload": 2}]) and count_tasks(dsn) == 4


def test_enqueue_many_all_or_nothing_on_database_error(tq: TaskQueue, dsn: str) -> None:
    tq.enqueue("before")
    # A spec that passes validation but that the database rejects (a test-only CHECK):
    # the batch's other task and its new pool row must roll back with it.
    with psycopg.connect(dsn) as conn:
        conn.execute(
            "ALTER TABLE taskqueue.tasks ADD CONSTRAINT test_no_poison CHECK (payload <> '\"poison\"'::jsonb)"
        )
    with pytest.raises(Exception):
        tq.enqueue_many([{"payload": "fine", "pool": "newpool"}, {"payload": "poison"}])
    assert count_tasks(dsn) == 1
    assert tq.pool("newpool") is None


# -- transactional enqueue ---------------------------------------------------


@pytest.mark.sync_api("passes a sync Connection/Session; test_async_api.py passes AsyncConnection/AsyncSession")
def test_enqueue_on_connection_commits_with_caller(tq: TaskQueue, dsn: str, user_engine: sa.Engine) -> None:
    with user_engine.connect() as conn:
        conn.execute(sa.text("INSERT INTO app_orders (note) VALUES ('order 1')"))
        tid = tq.enqueue({"order": 1}, connection=conn, pool="mail")
        ids = tq.enqueue_many([{"payload": 2}, {"payload": 3}], connection=conn)
        # Still the caller's search_path: its own unqualified table works.
        assert conn.execute(sa.text("SELECT count(*) FROM app_orders")).scalar_one() == 1
        assert tq.get(tid) is None and count_tasks(dsn) == 0  # not visible before commit
        conn.commit()
    assert tq.get(tid) is not None and all(tq.get(i) for i in ids)
    assert tq.pool("mail") is not None


@pytest.mark.sync_api("passes a sync Connection/Session; test_async_api.py passes AsyncConnection/AsyncSession")
def test_enqueue_on_connection_rolls_back_with_caller(tq: TaskQueue, dsn: str, user_engine: sa.Engine) -> None:
    with user_engine.connect() as conn:
        conn.execute(sa.text("INSERT INTO app_orders (note) VALUES ('doomed')"))
        tq.enqueue({"order": 1}, connection=conn, pool="mail")
        tq.enqueue_many([{"payload": 2}], connection=conn)
        conn.rollback()
    assert count_tasks(dsn) == 0
    assert tq.pool("mail") is None
    with user_engine.connect() as conn:
        assert conn.execute(sa.text("SELECT count(*) FROM app_orders")).scalar_one() == 0


@pytest.mark.sync_api("passes a sync Connection/Session; test_async_api.py passes AsyncConnection/AsyncSession")
def test_enqueue_with_session(tq: TaskQueue, dsn: str, user_engine: sa.Engine) -> None:
    with Session(user_engine) as session:
        session.execute(sa.text("INSERT INTO app_orders (note) VALUES ('s')"))
        kept = tq.enqueue({"kept": True}, connection=session)
        session.commit()
    with Session(user_engine) as session:
        tq.enqueue({"dropped": True}, connection=session)
        tq.enqueue_many([{"payload": "dropped too"}], connection=session)
        session.rollback()
    assert count_tasks(dsn) == 1
    assert tq.get(kept).payload == {"kept": True}  # type: ignore[union-attr]


@pytest.mark.sync_api("passes a sync Connection/Session; test_async_api.py passes AsyncConnection/AsyncSession")
def test_enqueue_with_session_inside_begin_block(tq: TaskQueue, dsn: str, user_engine: sa.Engine) -> None:
    with pytest.raises(RuntimeError):
        with Session(user_engine) as session, session.begin():
            tq.enqueue("x", connection=session)
            raise RuntimeError("caller fails after enqueue")
    assert count_tasks(dsn) == 0
    with Session(user_engine) as session, session.begin():
        tid = tq.enqueue("y", connection=session)
    assert tq.get(tid) is not None


@pytest.mark.sync_api("passes a sync Connection/Session; test_async_api.py passes AsyncConnection/AsyncSession")
def test_foreign_connection_search_path_is_restored(tq: TaskQueue, user_engine: sa.Engine) -> None:
    with user_engine.connect() as conn:
        before = conn.execute(sa.text("SHOW search_path")).scalar_one()
        tq.enqueue("x", connection=conn)
        after = conn.execute(sa.text("SHOW search_path")).scalar_one()
        conn.commit()
    assert before == after


# -- NOTIFY -------------------------------------------------------------------


def test_enqueue_notifies_once(tq: TaskQueue, listener: psycopg.Connection) -> None:
    tq.enqueue("x")
    assert drain(listener) == 1
    tq.enqueue_many([{"payload": i} for i in range(25)])
    assert drain(listener) == 1


@pytest.mark.sync_api("passes a sync Connection/Session; test_async_api.py passes AsyncConnection/AsyncSession")
def test_notify_once_per_caller_transaction(
    tq: TaskQueue, listener: psycopg.Connection, user_engine: sa.Engine
) -> None:
    with user_engine.connect() as conn:
        for i in range(5):
            tq.enqueue(i, connection=conn)
        tq.enqueue_many([{"payload": "a"}, {"payload": "b"}], connection=conn)
        assert drain(listener, 0.2) == 0  # nothing before commit
        conn.commit()
    assert drain(listener) == 1
    with user_engine.connect() as conn:
        tq.enqueue("rolled back", connection=conn)
        conn.rollback()
    assert drain(listener, 0.2) == 0


def test_dedupe_hit_does_not_notify(tq: TaskQueue, listener: psycopg.Connection) -> None:
    tq.enqueue("x", dedupe_key="k")
    assert drain(listener) == 1
    tq.enqueue("x", dedupe_key="k")
    assert drain(listener, 0.2) == 0


@pytest.mark.sync_api("passes a sync Connection/Session; test_async_api.py passes AsyncConnection/AsyncSession")
def test_bad_input_rolls_back_nothing_for_caller(tq: TaskQueue, dsn: str, user_engine: sa.Engine) -> None:
    with user_engine.connect() as conn:
        tq.enqueue("good", connection=conn)
        with pytest.raises(ValidationError):
            tq.enqueue("bad", priority="high", connection=conn)  # type: ignore[arg-type]
        conn.commit()  # the caller's transaction is still usable
    assert count_tasks(dsn) == 1


def test_store_driver_statements_have_no_literal_colons() -> None:
    """The driver-side statements are converted textually; a ':word' in a literal would be mangled."""
    import re

    from taskqueue.db import DRIVER
    from taskqueue.sql import STATEMENTS as SQL

    for name in DRIVER:
        literals = re.findall(r"'[^']*'", SQL[name])
        assert not [lit for lit in literals if re.search(r":\w", lit)], name
        assert "%(" in DRIVER[name] and not re.search(r"(?<![:\w]):[A-Za-z_]", DRIVER[name]), name
