"""The PostgreSQL server the tests run against, and a fresh database per test.

Chosen in this order: ``$TASKQUEUE_TEST_DSN``; a testcontainers PostgreSQL when
a Docker engine answers; the embedded pgserver in a throw-away directory.
Each test gets its own database, cloned from a migrated template.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field

import psycopg
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo

TEMPLATE = f"tq_template_{os.getpid()}"
_counter = itertools.count(1)


@dataclass
class Server:
    dsn: str  # any database on the server; used for admin statements
    kind: str
    _stack: contextlib.ExitStack = field(default_factory=contextlib.ExitStack)

    def dsn_for(self, dbname: str) -> str:
        return make_conninfo(self.dsn, dbname=dbname)

    def admin(self) -> psycopg.Connection:
        return psycopg.connect(self.dsn, autocommit=True)

    def close(self) -> None:
        self._stack.close()


def docker_available() -> bool:
    try:
        import docker

        client = docker.from_env(timeout=3)
        client.ping()
        return True
    except Exception:
        return False


def start_testcontainer(stack: contextlib.ExitStack) -> str:
    from testcontainers.postgres import PostgresContainer

    container = stack.enter_context(PostgresContainer("postgres:16-alpine", driver=None))
    return container.get_connection_url()


def start_embedded(stack: contextlib.ExitStack) -> str:
    from taskqueue.embedded import EmbeddedServer

    root = tempfile.mkdtemp(prefix="taskqueue-tests-")
    os.chmod(root, 0o755)
    stack.callback(shutil.rmtree, root, ignore_errors=True)
    server = EmbeddedServer(os.path.join(root, "pgdata"))
    dsn = server.start()
    stack.callback(server.stop)
    with psycopg.connect(dsn, autocommit=True) as conn:
        # Durability is not under test here; speed is welcome.
        for setting, value in (("fsync", "off"), ("synchronous_commit", "off"), ("full_page_writes", "off")):
            conn.execute(sql.SQL("ALTER SYSTEM SET {} = {}").format(sql.Identifier(setting), sql.Literal(value)))
        conn.execute("SELECT pg_reload_conf()")
    return dsn


def start_server() -> Server:
    stack = contextlib.ExitStack()
    dsn = os.environ.get("TASKQUEUE_TEST_DSN")
    if dsn:
        return Server(dsn, "TASKQUEUE_TEST_DSN", stack)
    if docker_available():
        return Server(start_testcontainer(stack), "testcontainers", stack)
    return Server(start_embedded(stack), "embedded", stack)


def drop_database(server: Server, name: str) -> None:
    with server.admin() as conn:
        conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))


def create_template(server: Server, migrate) -> str:  # type: ignore[no-untyped-def]
    drop_database(server, TEMPLATE)
    with server.admin() as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(TEMPLATE)))
    migrate(server.dsn_for(TEMPLATE))
    return TEMPLATE


@contextlib.contextmanager
def fresh_database(server: Server, template: str | None) -> Iterator[str]:
    name = f"tq_test_{os.getpid()}_{next(_counter)}"
    with server.admin() as conn:
        if template is None:
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
        else:
            conn.execute(
                sql.SQL("CREATE DATABASE {} TEMPLATE {} STRATEGY file_copy").format(
                    sql.Identifier(name), sql.Identifier(template)
                )
            )
    try:
        yield server.dsn_for(name)
    finally:
        drop_database(server, name)


def dbname_of(dsn: str) -> str:
    return conninfo_to_dict(dsn).get("dbname", "")
