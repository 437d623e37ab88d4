"""A PostgreSQL crash-restart (``pg_ctl restart -m immediate``) in the middle of
a run. Every session dies at once and uncommitted work is rolled back; a
completion whose COMMIT was cut off is settled by the database (done) or by the
rescue (run again). Workers reconnect on their own and finish the run.

The server is a dedicated embedded one started for this test, so the shared
test server is never restarted. With ``TASKQUEUE_TEST_DSN`` the test is
skipped: that server belongs to the operator, and the suite must not start
others beside it.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from taskqueue import TaskQueue
from tests.chaos.harness import (
    Fleet,
    assert_invariants,
    bump,
    install_ledger,
    query,
    unfinished,
    wait_all_final,
    wait_for,
)

RESTARTS = 2


@pytest.fixture
def own_server() -> Iterator[Any]:
    if os.environ.get("TASKQUEUE_TEST_DSN"):
        pytest.skip("TASKQUEUE_TEST_DSN is set: the suite does not start or restart servers of its own")
    root = tempfile.mkdtemp(prefix="taskqueue-restart-")
    os.chmod(root, 0o755)
    os.environ.setdefault("XDG_RUNTIME_DIR", os.path.join(root, "run"))
    os.makedirs(os.environ["XDG_RUNTIME_DIR"], exist_ok=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import pgserver

        try:
            server = pgserver.get_server(os.path.join(root, "pgdata"), cleanup_mode="stop")
        except Exception as exc:  # pragma: no cover - depends on the machine
            shutil.rmtree(root, ignore_errors=True)
            pytest.skip(f"cannot start a dedicated embedded PostgreSQL to restart: {exc}")
    try:
        yield server
    finally:
        server.cleanup()
        shutil.rmtree(root, ignore_errors=True)


def restart_immediately(server: Any) -> None:
    import pgserver

    pgserver.pg_ctl(["-w", "-m", "immediate", "-t", "60", "restart"], pgdata=server.pgdata, user=server.system_user)
    bump("PostgreSQL restarts (pg_ctl restart -m immediate)")


def test_workers_survive_an_immediate_restart(own_server: Any, tmp_path: Path) -> None:
    dsn = own_server.get_uri()
    with TaskQueue(dsn) as tq:
        tq.migrate()
        install_ledger(dsn)
        tq.set_pool_limit("net", 3)
        tq.enqueue_many(
            {"payload": {"ms": 5}, "queue": "chaos", "pool": "net" if i % 2 else None, "max_attempts": 10}
            for i in range(800)
        )
        logdir = tmp_path / "logs"
        logdir.mkdir()
        fleet = Fleet(dsn, logdir)
        try:
            fleet.start(3)
            for _ in range(RESTARTS):
                done_before = query(dsn, "SELECT count(*) FROM taskqueue.tasks WHERE state = 'done'")[0][0]
                wait_for(lambda: query(dsn, "SELECT count(*) FROM taskqueue.tasks WHERE state = 'done'")[0][0]
                         >= done_before + 100, 90, "the workers to make progress")
                assert unfinished(dsn) > 0, "the run ended before the restart; the scenario proved nothing"
                restart_immediately(own_server)
            wait_all_final(dsn, 120)
            assert len(fleet.alive()) == 3  # nobody died of it
            tq.engine.dispose()  # its pooled connections died with the server
            outcome = assert_invariants(tq, dsn, expected_tasks=800)
            assert outcome.tasks == 800
        finally:
            fleet.stop()
