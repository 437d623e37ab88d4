"""The run of record's table says, for each shape, where it stands now and where it stood in the run before."""

from __future__ import annotations

from typing import Any

from bench import shape_tables


def _shape(name: str, x1: float, x8: float, growth: float, batch: float, p50: float | None) -> dict[str, Any]:
    side = {"ratio": 0.0, "of_ceiling": 0.5, "by_id_per_s": 200.0, "naive_per_s": 100.0}
    s: dict[str, Any] = {
        "shape": name, "target_ratio": 0.8, "p99_growth": growth, "met": x1 >= 0.8 and x8 >= 0.8 and growth <= 1.5,
        "x1": {**side, "ratio": x1}, "x8": {**side, "ratio": x8},
        "batch_p99_growth": batch, "batch_p99_ms_per_task": {"small": 1.0, "big": batch},
    }
    if p50 is not None:
        s["batch_p50_growth"] = p50
    return s


def test_each_row_gives_the_p50_growth_and_the_earlier_run() -> None:
    shapes = [_shape("half", 1.2, 0.9, 1.1, 1.7, 1.3), _shape("new_one", 0.7, 0.6, 2.0, 1.0, None)]
    now = {"clients": 8, "shapes": shapes}
    then = {"clients": 8, "shapes": [_shape("half", 1.0, 0.7, 0.9, 2.0, None)]}
    lines = shape_tables.record_table(now, then, "v33").splitlines()
    assert lines[0].endswith("| before (v33: x1 / x8 / growth) |")
    half, new_one = lines[2].split(" | "), lines[3].split(" | ")
    assert half[5] == "1.70× (over 1.5×) (1.70 ms)" and half[6] == "1.30×"
    assert half[-1] == "1.00× / 0.70× / 0.90× |"
    assert new_one[6] == "–" and new_one[-1] == "– |" and new_one[-2] == "no"


def test_without_an_earlier_run_there_is_no_before_column() -> None:
    now = {"clients": 8, "shapes": [_shape("half", 1.2, 0.9, 1.1, 1.2, 1.0)]}
    lines = shape_tables.record_table(now).splitlines()
    assert "before" not in lines[0] and lines[2].split(" | ")[-1] == "yes |"


def test_the_lean_table_sets_each_shape_against_the_copy_and_leaves_out_older_runs() -> None:
    lean = _shape("one_size", 0.9, 0.95, 1.1, 1.2, 1.0)
    for side, rate in (("x1", 500.0), ("x8", 1000.0)):
        lean[side] = {**lean[side], "naive_lean_per_s": rate, "ours_per_s": rate * 0.6, "ratio_lean": 0.6}
    lean["met_lean"] = False
    old = _shape("half", 1.2, 0.9, 1.1, 1.2, 1.0)  # measured before the copy: no lean figures
    lines = shape_tables.lean_table({"clients": 8, "shapes": [lean, old]}).splitlines()
    assert len(lines) == 3 and "ratio to the copy x8" in lines[0]
    cells = lines[2].split(" | ")
    assert cells[2:5] == ["500.0/s", "300.0/s", "0.60×"]
    assert cells[8] == "0.90× / 0.95×" and cells[-1] == "no |"
