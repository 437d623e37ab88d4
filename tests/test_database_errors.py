"""Database errors reach callers as taskqueue.DatabaseError, raised from the driver's own error.

And the worker's completer retries the transient ones before it gives an
outcome up, so a finished task is not run again for a blip.
"""

from __future__ import annotations

import threading
from typing import Any

import psycopg
import pytest
import sqlalchemy as sa

from taskqueue import DatabaseError, TaskQueue, TaskQueueError, ValidationError, Worker
from taskqueue.dsn import to_sqlalchemy_url
from taskqueue.errors import SchemaMissing

UNREACHABLE = "postgresql://nobody@127.0.0.1:1/none?connect_timeout=2"


def test_a_missing_schema_is_a_database_error_that_says_migrate(dsn: str) -> None:
    with TaskQueue(dsn, schema="never_migrated") as tq, pytest.raises(SchemaMissing) as caught:
        tq.stats()
    err = caught.value
    assert isinstance(err, DatabaseError) and isinstance(err, TaskQueueError)
    assert isinstance(err.__cause__, psycopg.errors.UndefinedTable)
    assert err.sqlstate == "42P01" and not err.transient
    assert "taskqueue migrate" in str(err)


def test_an_unreachable_server_is_a_transient_database_error() -> None:
    with TaskQueue(UNREACHABLE) as tq, pytest.raises(DatabaseError) as caught:
        tq.get(1)
    assert isinstance(caught.value.__cause__, psycopg.OperationalError)
    assert caught.value.transient
    assert str(caught.value).startswith("cannot reach the database")


def test_validation_comes_before_any_connection() -> None:
    with TaskQueue(UNREACHABLE) as tq, pytest.raises(ValidationError):
        tq.enqueue("x", priority="high")  # type: ignore[arg-type]


def test_an_error_in_the_callers_transaction_is_a_database_error(tq: TaskQueue, dsn: str) -> None:
    engine = sa.create_engine(to_sqlalchemy_url(dsn))
    try:
        with engine.connect() as conn:
            with pytest.raises(sa.exc.DataError):
                conn.execute(sa.text("SELECT 1 / 0"))
            with pytest.raises(DatabaseError) as caught:
                tq.enqueue("x", connection=conn)
            assert isinstance(caught.value.__cause__, psycopg.errors.InFailedSqlTransaction)
            assert caught.value.sqlstate == "25P02" and not caught.value.transient
            conn.rollback()
    finally:
        engine.dispose()
    assert tq.tasks() == []


class FlakyCompletions:
    """A TaskQueue whose first ``complete_many`` fails as a lost connection would."""

    def __init__(self, tq: TaskQueue) -> None:
        self.tq = tq
        self.failures = 0

    def complete_many(self, *args: Any, **kwargs: Any) -> list[int]:
        if self.failures == 0:
            self.failures += 1
            raise DatabaseError("cannot reach the database: injected", transient=True)
        return self.tq.complete_many(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.tq, name)


def test_the_completer_retries_a_transient_error_instead_of_losing_the_outcome(tq: TaskQueue) -> None:
    runs: list[int] = []
    w = Worker(queues=["once"], lease=30.0, poll_interval=30.0, grace=5.0, maintenance=False)
    w.handler("once")(lambda task: runs.append(task.id) or "ok")
    flaky: list[FlakyCompletions] = []

    def hook(worker: Worker) -> None:
        assert worker.completer is not None
        flaky.append(FlakyCompletions(tq))
        worker.completer.tq = flaky[0]  # type: ignore[assignment]

    w.on_services.append(hook)
    w.signals.init()
    task_id = tq.enqueue({}, queue="once")
    thread = threading.Thread(target=w.run, args=(tq,), daemon=True)
    thread.start()
    try:
        assert w.signals.recorded.wait() == {task_id: "done"}
    finally:
        w.stop()
        thread.join(10)
    assert not thread.is_alive()
    assert flaky[0].failures == 1
    assert runs == [task_id]
    got = tq.get(task_id)
    assert got is not None and (got.state, got.attempts, got.result) == ("done", 1, "ok")
