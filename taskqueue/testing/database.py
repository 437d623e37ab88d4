"""The PostgreSQL server a test session runs against, and a fresh database for each test.

The server is chosen once per session, in this order:

1. ``$TASKQUEUE_TEST_DSN``: a server of your own (the role needs CREATEDB);
2. a testcontainers PostgreSQL, when testcontainers is installed and a Docker
   engine answers;
3. the embedded PostgreSQL of the ``pgserver`` wheel, in a throw-away directory.

A test's database is cloned from a template migrated once per session
(``CREATE DATABASE ... TEMPLATE``): a clone takes milliseconds, a migration
about a second. Database names come from this process and a random token, so
sessions sharing a server (or a pytester run inside a session) never meet.

Creating and dropping databases names them, which no bound parameter can do;
that is the one thing done here with composed identifiers, on the server's
maintenance connection. The queue's own statements stay in ``taskqueue/sql``.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import secrets
import shutil
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # psycopg is imported when a server is first used, never by the plugin's import
    import psycopg

ENV_DSN = "TASKQUEUE_TEST_DSN"
POSTGRES_IMAGE = "postgres:16-alpine"
#: Settings of a throw-away server: durability is not under test, speed is welcome.
FAST_SETTINGS = (("fsync", "off"), ("synchronous_commit", "off"), ("full_page_writes", "off"))


@dataclass
class Server:
    """A PostgreSQL server this session may create databases on."""

    dsn: str  # any database on the server; used for CREATE/DROP DATABASE
    kind: str  # where it came from: "TASKQUEUE_TEST_DSN", "testcontainers" or "embedded"
    _stack: contextlib.ExitStack = field(default_factory=contextlib.ExitStack, repr=False)
    prefix: str = field(default_factory=lambda: f"tq_test_{os.getpid()}_{secrets.token_hex(3)}")
    _counter: Iterator[int] = field(default_factory=lambda: itertools.count(1), repr=False)
    _file_copy: bool | None = field(default=None, repr=False)

    def dsn_for(self, dbname: str) -> str:
        from psycopg.conninfo import make_conninfo

        return make_conninfo(self.dsn, dbname=dbname)

    def admin(self) -> psycopg.Connection[tuple[object, ...]]:
        import psycopg

        return psycopg.connect(self.dsn, autocommit=True)

    def new_name(self, what: str = "db") -> str:
        return f"{self.prefix}_{what}{next(self._counter)}"

    def create_database(self, name: str, template: str | None = None) -> str:
        """Create ``name`` (a clone of ``template`` when given) and return its DSN."""
        from psycopg import sql

        statement = sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name))
        with self.admin() as conn:
            if template is not None:
                statement += sql.SQL(" TEMPLATE {}").format(sql.Identifier(template))
                if self._file_copy is None:  # PostgreSQL 15+: copy the files, skip the WAL of every page
                    self._file_copy = conn.info.server_version >= 150000
                if self._file_copy:
                    statement += sql.SQL(" STRATEGY file_copy")
            conn.execute(statement)
        return self.dsn_for(name)

    def drop_database(self, name: str) -> None:
        from psycopg import sql

        with self.admin() as conn:
            conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))

    def close(self) -> None:
        self._stack.close()


def _postgres_container() -> Any:
    """testcontainers' PostgresContainer: from ``testcontainers.community`` where it lives since 4.15
    (the old module still imports there, with a DeprecationWarning), else from ``testcontainers.postgres``."""
    try:
        from testcontainers.community.postgres import PostgresContainer
    except ImportError:
        from testcontainers.postgres import PostgresContainer
    return PostgresContainer


def docker_available() -> bool:
    """True when testcontainers is installed and a Docker engine answers a ping."""
    try:
        import docker

        _postgres_container()  # only worth asking Docker when it can be used
    except ImportError:
        return False
    try:
        docker.from_env(timeout=3).ping()
    except Exception:
        return False
    return True


def start_testcontainer(stack: contextlib.ExitStack) -> str:
    container = stack.enter_context(_postgres_container()(POSTGRES_IMAGE, driver=None))
    return str(container.get_connection_url())


def start_embedded(stack: contextlib.ExitStack) -> str:
    import psycopg
    from psycopg import sql

    from ..embedded import EmbeddedServer

    root = tempfile.mkdtemp(prefix="taskqueue-tests-")
    os.chmod(root, 0o755)  # as root, the server runs as another user, who must reach its data
    stack.callback(shutil.rmtree, root, ignore_errors=True)
    server = EmbeddedServer(os.path.join(root, "pgdata"))
    dsn = server.start()
    stack.callback(server.stop)
    with psycopg.connect(dsn, autocommit=True) as conn:
        for setting, value in FAST_SETTINGS:
            conn.execute(sql.SQL("ALTER SYSTEM SET {} = {}").format(sql.Identifier(setting), sql.Literal(value)))
        conn.execute("SELECT pg_reload_conf()")
    return dsn


def start_server(environ: dict[str, str] | None = None) -> Server:
    """The session's server: ``$TASKQUEUE_TEST_DSN``, else testcontainers, else embedded."""
    environ = dict(os.environ) if environ is None else environ
    stack = contextlib.ExitStack()
    given = environ.get(ENV_DSN, "").strip()
    if given:
        from ..dsn import to_libpq

        return Server(to_libpq(given), ENV_DSN, stack)
    try:
        if docker_available():
            return Server(start_testcontainer(stack), "testcontainers", stack)
        return Server(start_embedded(stack), "embedded", stack)
    except BaseException:
        stack.close()
        raise


def create_template(server: Server, migrate: Callable[[str], None]) -> str:
    """A database brought up to date by ``migrate(dsn)``, for ``fresh_database`` to clone."""
    name = server.new_name("template")
    dsn = server.create_database(name)
    try:
        migrate(dsn)
    except BaseException:
        server.drop_database(name)
        raise
    return name


def migrate_queue(schema: str) -> Callable[[str], None]:
    """A ``migrate`` for ``create_template``: the queue's tables in ``schema``."""

    def migrate(dsn: str) -> None:
        from ..queue import TaskQueue

        with TaskQueue(dsn, schema=schema) as tq:
            tq.migrate()

    return migrate


@contextlib.contextmanager
def fresh_database(server: Server, template: str | None) -> Iterator[str]:
    """A database of its own (a clone of ``template``, or empty), dropped afterwards; yields its DSN."""
    name = server.new_name()
    dsn = server.create_database(name, template)
    try:
        yield dsn
    finally:
        server.drop_database(name)

