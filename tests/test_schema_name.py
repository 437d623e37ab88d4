"""A queue lives in its own PostgreSQL schema; several schemas share one database."""

from __future__ import annotations

import psycopg
import psycopg.conninfo
import pytest

from taskqueue import Pool, TaskQueue, ValidationError


def test_non_default_schema_is_isolated(tq: TaskQueue, dsn: str) -> None:
    with TaskQueue(dsn, schema="jobs_other") as other:
        other.migrate()
        assert other.schema == "jobs_other"
        mine = tq.enqueue("default schema")
        theirs = other.enqueue("other schema", pool="p")
        other.set_pool_limit("p", 1)
        assert tq.claim().payload == "default schema"  # type: ignore[union-attr]
        assert tq.claim() is None
        task = other.claim()
        assert task is not None and task.payload == "other schema" and task.id == theirs
        assert other.pools() == [Pool("p", 1, 1)] and tq.pools() == []
        other.complete(task)
        assert tq.get(mine).state == "running"  # type: ignore[union-attr]
        assert other.stats().by_state["done"] == 1 and tq.stats().by_state["done"] == 0
        assert tq.channel != other.channel
    with psycopg.connect(dsn) as conn:
        names = {
            r[0]
            for r in conn.execute(
                "SELECT table_schema FROM information_schema.tables WHERE table_name = 'tasks'"
            ).fetchall()
        }
    assert names == {"taskqueue", "jobs_other"}


def test_schema_name_is_validated_not_pasted() -> None:
    with pytest.raises(ValidationError):
        TaskQueue("postgresql://localhost/x", schema='x"; DROP TABLE tasks; --')


def test_claim_function_is_bound_to_its_schema(tq: TaskQueue, dsn: str) -> None:
    with TaskQueue(dsn, schema="jobs_b") as other:
        other.migrate()
        other.enqueue("b-only")
        # The default queue's claim must not see the other schema's task.
        assert tq.claim() is None
        assert other.claim() is not None


def test_dsn_argument_env_and_sqlalchemy_url(dsn: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TASKQUEUE_DSN", dsn)
    with TaskQueue() as from_env:  # no argument: $TASKQUEUE_DSN
        assert from_env.dsn == dsn
        tid = from_env.enqueue("via env")
    monkeypatch.setenv("TASKQUEUE_DSN", "postgresql://nobody@127.0.0.1:1/nowhere")
    with TaskQueue(dsn) as explicit:  # the argument wins over the environment
        assert explicit.get(tid) is not None
    params = psycopg.conninfo.conninfo_to_dict(dsn)
    url = f"postgresql+psycopg://{params.get('user', 'postgres')}@/{params['dbname']}?host={params['host']}"
    with TaskQueue(url) as from_url:  # a SQLAlchemy URL works as well
        assert from_url.get(tid).payload == "via env"  # type: ignore[union-attr]


def test_context_manager_and_close(dsn: str) -> None:
    with TaskQueue(dsn) as q:
        q.enqueue("x")
    q.close()  # closing twice is harmless
    with TaskQueue(dsn) as again:
        assert again.stats().by_state["queued"] == 1
