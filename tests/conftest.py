"""The project's own fixtures are the ones its users get: taskqueue's pytest plugin.

``tq`` (a migrated, empty queue), ``taskqueue_database`` and friends come
from ``taskqueue/testing/plugin.py``; ``dsn`` and ``empty_dsn`` are this
suite's shorter names for two of them.
"""

from __future__ import annotations

import pytest

from tests.support.plugin import PLUGIN, registered_by_entry_point

if not registered_by_entry_point():
    pytest_plugins = [PLUGIN]


@pytest.fixture
def dsn(taskqueue_database: str) -> str:
    """A fresh, migrated database of its own for this test."""
    return taskqueue_database


@pytest.fixture
def empty_dsn(taskqueue_empty_database: str) -> str:
    """A fresh database with nothing in it (for migration tests)."""
    return taskqueue_empty_database


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
