"""bench random_shapes --clients: each random shape measured with N consumers a side, as the issue's x8 column."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest

from bench import common, random_shapes
from bench import shapes as S
from bench.shape_catalog import Shape

pytestmark = pytest.mark.slow

HALF = Shape("half", "priorities 0..9; required 1..100; half fit", "(g * 31) %% 10", "1 + (g * 7919) %% 100", 1)


def test_both_sides_run_with_the_consumers_asked_for_and_the_rows_go_back(
    dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[tuple[str, int]] = []
    real_phase = S.phase

    def phase(fn: Any, clients: int, args: dict[str, Any], label: str, seconds: float) -> Any:
        seen.append((fn.__name__, clients))
        return real_phase(fn, clients, args, label, seconds)

    monkeypatch.setattr(S, "phase", phase)
    try:
        got = random_shapes.measure(dsn, HALF, 0.5, 3000, 0.4, clients=2)
        with psycopg.connect(dsn) as conn:
            left = conn.execute(f"SELECT count(*) FROM {S.SCHEMA}.tasks WHERE state <> 'queued'").fetchone()
    finally:
        common.drop_schema(dsn, S.SCHEMA)
    assert sorted(seen) == [("naive_client", 2), ("ours_client", 2)]
    assert left == (0,)
    assert got["clients"] == 2 and 1 <= got["available"] <= 100
    assert got["naive_per_s"] > 0 and got["ours_per_s"] > 0
    assert got["ratio"] == pytest.approx(got["ours_per_s"] / got["naive_per_s"])
    table = random_shapes.table({"clients": 2, "shapes": [got]})
    assert "| naive x2 | ours x2 |" in table and f"| half | {got['available']:,} |" in table
