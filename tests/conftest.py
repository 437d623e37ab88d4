from __future__ import annotations

from collections.abc import Iterator

import pytest

from taskqueue import TaskQueue
from tests.support.database import Server, create_template, fresh_database, start_server


def _migrate(dsn: str) -> None:
    with TaskQueue(dsn) as tq:
        tq.migrate()


@pytest.fixture(scope="session")
def pg_server() -> Iterator[Server]:
    server = start_server()
    try:
        yield server
    finally:
        server.close()


@pytest.fixture(scope="session")
def template_db(pg_server: Server) -> Iterator[str]:
    from tests.support.database import drop_database

    name = create_template(pg_server, _migrate)
    yield name
    drop_database(pg_server, name)


@pytest.fixture
def dsn(pg_server: Server, template_db: str) -> Iterator[str]:
    """A fresh, migrated database of its own for this test."""
    with fresh_database(pg_server, template_db) as url:
        yield url


@pytest.fixture
def empty_dsn(pg_server: Server) -> Iterator[str]:
    """A fresh database with nothing in it (for migration tests)."""
    with fresh_database(pg_server, None) as url:
        yield url


@pytest.fixture
def tq(dsn: str) -> Iterator[TaskQueue]:
    with TaskQueue(dsn) as queue:
        yield queue


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Tests marked sync_api run against TaskQueue only: their async runs are deselected (never skipped)."""
    keep: list[pytest.Item] = []
    dropped: list[pytest.Item] = []
    for item in items:
        callspec = getattr(item, "callspec", None)
        if item.get_closest_marker("sync_api") and callspec is not None and callspec.params.get("tq") == "async":
            dropped.append(item)
        else:
            keep.append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = keep
