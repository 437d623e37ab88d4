"""``bench versions --old`` loads an earlier state of the functions, one whose signature later changed too."""

from __future__ import annotations

import psycopg
import pytest

from bench import versions
from taskqueue import TaskQueue


def test_migration_0056s_park_rows_and_claim_load_and_park(tq: TaskQueue, dsn: str) -> None:
    """park_rows v6 took no direction; without dropping v8 first, claim_tasks v41's call would be ambiguous."""
    for name in ("park_rows.v8.none", "park_rows.v6", "claim_tasks.v41"):
        versions.load_old(dsn, "taskqueue", name)
    with psycopg.connect(dsn) as conn:
        (count,) = conn.execute("SELECT count(*) FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace "
                                "WHERE n.nspname = 'taskqueue' AND p.proname = 'park_rows'").fetchone()  # type: ignore[misc]
    assert count == 1
    tq.set_pool_limit("full", 0)
    full = tq.enqueue_many([{"payload": i, "pool": "full"} for i in range(3)])
    free = tq.enqueue("free")
    got = tq.claim()
    assert got is not None and got.id == free
    with psycopg.connect(dsn) as conn:
        parked = [r[0] for r in conn.execute("SELECT id FROM taskqueue.tasks WHERE parked ORDER BY id")]
    assert parked == full, "the older park_rows ran from the older claim"


def test_an_unknown_old_file_stops_the_run(dsn: str) -> None:
    with pytest.raises(SystemExit, match="no function file"):
        versions.load_old(dsn, "taskqueue", "park_rows.v99")
