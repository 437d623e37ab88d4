"""The testcontainers path of the test database: the class it starts, and a real start where Docker answers.

These machines have no Docker engine, so the start is skipped there, saying
why; the import path is checked everywhere, since testcontainers 4.15 moved
PostgresContainer to ``testcontainers.community.postgres`` and warns on the
old module.
"""

from __future__ import annotations

import contextlib
import inspect
import warnings

import psycopg
import pytest

from taskqueue.testing.database import _postgres_container, docker_available, start_testcontainer


def test_the_container_class_imports_without_a_deprecation_warning() -> None:
    pytest.importorskip("testcontainers")
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        container = _postgres_container()
    assert container.__name__ == "PostgresContainer"
    assert "driver" in inspect.signature(container.__init__).parameters  # we pass driver=None: a plain URL


def test_a_testcontainers_server_answers_when_docker_does() -> None:
    if not docker_available():
        pytest.skip("no Docker engine answers here: the testcontainers path cannot start a server")
    with contextlib.ExitStack() as stack:
        dsn = start_testcontainer(stack)
        assert dsn.startswith("postgresql://"), dsn
        with psycopg.connect(dsn) as conn:
            row = conn.execute("SHOW server_version_num").fetchone()
        assert row is not None and int(row[0]) >= 150000
