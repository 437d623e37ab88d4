"""bench shapes' lean copy: the issue's reference table, the same rows with their key and the naive index only."""

from __future__ import annotations

import psycopg
import pytest

from bench import common
from bench import shapes as S
from bench.shape_catalog import LEAN_TABLE, Shape

pytestmark = pytest.mark.slow

HALF = Shape("half", "priorities 0..9; required 1..100; half fit", "(g * 31) %% 10", "1 + (g * 7919) %% 100", 50)


def test_the_lean_copy_holds_the_same_rows_and_nothing_of_the_queue_table(dsn: str) -> None:
    try:
        S.seed(dsn, S.SCHEMA, HALF, 500)
        S.make_lean_copy(dsn, S.SCHEMA, HALF)
        same = common.rows(dsn, S.SCHEMA, f"SELECT count(*) FROM (SELECT id, priority, required, state FROM tasks "
                                          f"EXCEPT SELECT id, priority, required, state FROM {LEAN_TABLE}) d")
        indexes = common.rows(dsn, S.SCHEMA, "SELECT indexrelid::regclass::text FROM pg_index "
                                             f"WHERE indrelid = '{LEAN_TABLE}'::regclass ORDER BY 1")
        checks = common.rows(dsn, S.SCHEMA, "SELECT count(*) FROM pg_constraint "
                                            f"WHERE conrelid = '{LEAN_TABLE}'::regclass AND contype = 'c'")
        rate = S.lean_phase(dsn, HALF, 1, {"dsn": dsn, "schema": S.SCHEMA, "shape": HALF, "cap": 40}, 5.0)
        with psycopg.connect(dsn) as conn:
            left = conn.execute(f"SELECT count(*) FROM {S.SCHEMA}.{LEAN_TABLE} WHERE state <> 'queued'").fetchone()
            ours = conn.execute(f"SELECT count(*) FROM {S.SCHEMA}.tasks WHERE state <> 'queued'").fetchone()
    finally:
        common.drop_schema(dsn, S.SCHEMA)
    assert same == [(0,)]
    assert [name for (name,) in indexes] == ["bench_naive_lean", f"{LEAN_TABLE}_pkey"]
    assert checks == [(0,)]
    assert rate > 0
    assert left == (0,)  # the lean phase puts its rows back
    assert ours == (0,)  # and never touched the queue's table
