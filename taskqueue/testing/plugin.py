"""The pytest plugin (entry point ``pytest11: taskqueue``): fixtures for tests of code that uses taskqueue.

Installing taskqueue registers it; ``-p no:taskqueue`` turns it off. Loading
it costs nothing a test run would notice: this module imports only pytest and
the standard library, and no server starts until a test asks for one of the
fixtures. A fixture of the same name in your own conftest.py (``tq``, say)
takes precedence over the plugin's, as pytest's fixtures always do.

See docs/testing.md.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from ..aio import AsyncTaskQueue
    from ..queue import TaskQueue
    from .database import Server

SCHEMA_INI = "taskqueue_schema"


@dataclass
class PluginState:
    """What the plugin did in this session (the terminal summary, and tests of the plugin, read it)."""

    server: Server | None = None
    databases: int = 0


STATE = pytest.StashKey[PluginState]()


def state_of(config: pytest.Config) -> PluginState:
    return config.stash.setdefault(STATE, PluginState())


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addini(SCHEMA_INI, "schema of the queue in taskqueue's test databases", default="taskqueue")


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter, config: pytest.Config) -> None:
    state = config.stash.get(STATE, None)
    if state is not None and state.server is not None:
        terminalreporter.write_line(
            f"taskqueue: {state.databases} test database(s) on a PostgreSQL from {state.server.kind}"
        )


@pytest.fixture(scope="session")
def taskqueue_server(request: pytest.FixtureRequest) -> Iterator[Server]:
    """The session's PostgreSQL server: $TASKQUEUE_TEST_DSN, else testcontainers (Docker), else embedded."""
    from .database import start_server

    state = state_of(request.config)
    server = start_server()
    state.server = server
    try:
        yield server
    finally:
        server.close()


@pytest.fixture(scope="session")
def taskqueue_dsn(taskqueue_server: Server) -> str:
    """The DSN of the session's server (a maintenance database on it; create your own databases there)."""
    return taskqueue_server.dsn


@pytest.fixture(scope="session")
def taskqueue_template(request: pytest.FixtureRequest, taskqueue_server: Server) -> Iterator[str]:
    """The name of a database migrated once per session, which every test's database is cloned from."""
    from .database import create_template, migrate_queue

    name = create_template(taskqueue_server, migrate_queue(request.config.getini(SCHEMA_INI)))
    try:
        yield name
    finally:
        taskqueue_server.drop_database(name)


@pytest.fixture
def taskqueue_database(
    request: pytest.FixtureRequest, taskqueue_server: Server, taskqueue_template: str
) -> Iterator[str]:
    """The DSN of a fresh, migrated database of this test's own, dropped after it."""
    from .database import fresh_database

    state_of(request.config).databases += 1
    with fresh_database(taskqueue_server, taskqueue_template) as dsn:
        yield dsn


@pytest.fixture
def taskqueue_empty_database(request: pytest.FixtureRequest, taskqueue_server: Server) -> Iterator[str]:
    """The DSN of a fresh database with nothing in it (to test migrations), dropped after the test."""
    from .database import fresh_database

    state_of(request.config).databases += 1
    with fresh_database(taskqueue_server, None) as dsn:
        yield dsn


@pytest.fixture
def tq(request: pytest.FixtureRequest, taskqueue_database: str) -> Iterator[TaskQueue]:
    """A migrated, empty ``TaskQueue`` of this test's own."""
    from ..queue import TaskQueue

    with TaskQueue(taskqueue_database, schema=request.config.getini(SCHEMA_INI)) as queue:
        yield queue


@pytest.fixture
async def async_tq(request: pytest.FixtureRequest, taskqueue_database: str) -> AsyncIterator[AsyncTaskQueue]:
    """A migrated, empty ``AsyncTaskQueue`` of this test's own, open on the test's event loop.

    An ``async def`` fixture: anyio's plugin runs it for a test marked
    ``@pytest.mark.anyio``, pytest-asyncio for any async test in auto mode.
    It needs asyncio: under another anyio backend (trio) the test is skipped.
    """
    import asyncio

    from ..aio import AsyncTaskQueue

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        pytest.skip("async_tq needs asyncio (AsyncTaskQueue runs on psycopg's asyncio pool); "
                    "set the anyio_backend fixture to 'asyncio'")

    async with AsyncTaskQueue(taskqueue_database, schema=request.config.getini(SCHEMA_INI)) as queue:
        yield queue
