"""bench hot_pool: one busy pool, single calls against batches and ours against the naive query, 1 and 8 consumers.

The scenario backs a claim in docs/operations.md (a batch takes a busy
pool's row lock once), so it must run every side it reports, sample ours'
wait events, and leave nothing behind.
"""

from __future__ import annotations

import psycopg
import pytest

from bench import hot_pool
from bench import shapes as S

pytestmark = pytest.mark.slow


def test_every_side_runs_for_each_count_of_consumers_and_nothing_is_left(dsn: str) -> None:
    got = hot_pool.measure(dsn, 2000, 0.3, rounds=1)
    with psycopg.connect(dsn) as conn:
        left = conn.execute("SELECT count(*) FROM pg_namespace WHERE nspname = %s", (S.SCHEMA,)).fetchone()
    assert left == (0,)
    assert set(got) == {f"x{c}" for c in hot_pool.CLIENT_COUNTS}
    for cell in got.values():
        assert set(cell["per_s"]) == {"naive", "ours", "single", "batch"}
        assert all(rate > 0 for rate in cell["per_s"].values()), cell["per_s"]
        assert all(len(rounds) == 1 for rounds in cell["rounds"].values())
        assert cell["ours_over_naive"] == pytest.approx(cell["per_s"]["ours"] / cell["per_s"]["naive"])
        assert cell["batch_over_single"] == pytest.approx(cell["per_s"]["batch"] / cell["per_s"]["single"])
        assert sum(cell["ours_wait_samples"].values()) > 0
        share = cell["ours_row_lock_share"]
        assert share is not None and 0 <= share <= 1


def test_the_shape_puts_every_task_of_a_priority_in_one_pool() -> None:
    # priority (g * 13) % 1000 and pool p((g * 13) % 200): the pool is the priority modulo 200.
    for g in range(1, 5000, 37):
        priority = (g * 13) % 1000
        assert (g * 13) % S.POOLS == priority % S.POOLS
