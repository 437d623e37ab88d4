"""Alembic environment: every object lives in one schema, set per run.

Run from the repository root (``alembic upgrade head`` with ``TASKQUEUE_DSN``)
or through ``TaskQueue.migrate()``, which passes its own connection and schema
in ``config.attributes``.
"""

from __future__ import annotations

import os

import sqlalchemy as sa
from alembic import context

from taskqueue.models import Base
from taskqueue.migrate import lock_for_migration
from taskqueue.schema import SCHEMA_DEFAULT, check_schema_name, prepare_schema

config = context.config
target_metadata = Base.metadata


def include_name(name: str | None, type_: str, _parent: object) -> bool:
    # The version table lives in the queue schema (the default schema under our
    # search_path), where autogenerate would otherwise report it as extra.
    return not (type_ == "table" and name == "alembic_version")


def run_on(connection: sa.Connection, schema: str) -> None:
    prepare_schema(connection, schema)
    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        include_name=include_name,
        version_table_schema=schema,
        compare_type=True,
        compare_server_default=True,
    )
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online() -> None:
    connection = config.attributes.get("connection")
    schema = check_schema_name(
        config.attributes.get("schema") or os.environ.get("TASKQUEUE_SCHEMA") or SCHEMA_DEFAULT
    )
    if connection is not None:  # TaskQueue.migrate() already holds the lock
        run_on(connection, schema)
        return
    from taskqueue.dsn import resolve_dsn, to_sqlalchemy_url

    engine = sa.create_engine(to_sqlalchemy_url(resolve_dsn(None)), poolclass=sa.NullPool)
    with engine.connect() as conn:
        lock_for_migration(conn, schema)
        run_on(conn, schema)
        conn.commit()
    engine.dispose()


if context.is_offline_mode():
    raise SystemExit("taskqueue migrations run online only: set TASKQUEUE_DSN and run `alembic upgrade head`")
run_migrations_online()
