"""The simulator: seed 003's targets on the PFN-like workload, starvation bounds, estimates off, the CLI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from taskqueue.cli.app import main
from taskqueue.scheduling.simulate import compare, starvation_bound, starvation_series
from taskqueue.scheduling.workload import Workload


def run_cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    """``taskqueue simulate ...`` through the real entry point: (exit code, stdout + stderr)."""
    try:
        main(["simulate", *args])
        code = 0
    except SystemExit as exc:
        code = int(exc.code or 0)
    out = capsys.readouterr()
    return code, out.out + out.err


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_backfill_halves_strict_waits_and_keeps_greedy_utilisation(seed: int) -> None:
    results = compare(Workload(seed=seed))
    strict, backfill, greedy = (results[p] for p in ("strict", "backfill", "greedy"))
    for priority in (0, 1):
        assert strict.stats()[priority].mean >= 2 * backfill.stats()[priority].mean
    assert backfill.utilisation >= 0.95 * greedy.utilisation


def test_greedy_starves_large_tasks_and_the_others_stay_under_the_bound() -> None:
    base = Workload.for_scenario("starvation")
    lengths = [500, 1000, 2000, 4000]
    series = starvation_series(base, lengths)
    bound = starvation_bound(base)
    assert series["greedy"][-1] > 10 * bound
    assert series["greedy"][-1] > series["greedy"][0]
    for policy in ("strict", "backfill"):
        assert max(series[policy]) <= bound


def test_fleet_of_three_capacities_does_not_starve_the_largest_task() -> None:
    wl = Workload.for_scenario("starvation", capacities=(15, 10, 6), ticks=3000)
    results = compare(wl)
    assert max(results["backfill"].large_waits) <= starvation_bound(wl)
    assert max(results["greedy"].large_waits) > 10 * starvation_bound(wl)
    # Every worker stays busy: the small stream is not held back everywhere for the one large task.
    assert results["backfill"].utilisation >= 0.95 * results["greedy"].utilisation


def test_estimates_off_by_half_still_bound_large_waits() -> None:
    # An overrunning backfilled task can pass the reservation's time; the worker
    # then holds back strictly, so the wait stays within one more longest run.
    wl = Workload.for_scenario("starvation", estimate_error=0.5, ticks=3000)
    results = compare(wl, ["backfill"])
    longest = wl.runtimes[1]
    assert max(results["backfill"].large_waits) <= starvation_bound(wl) * 1.5 + longest


def test_many_priorities_run_and_report_in_bands(capsys: pytest.CaptureFixture[str]) -> None:
    code, out = run_cli(capsys, "--priorities", "101", "--ticks", "300", "--json")
    assert code == 0, out
    doc = json.loads(out)
    assert set(doc["policies"]) == {"greedy", "strict", "backfill"}
    labels = list(doc["policies"]["backfill"]["waits"])
    assert labels[0] == "priorities 0-10" and len(labels) == 10
    assert sum(row["count"] for row in doc["policies"]["backfill"]["waits"].values()) > 0


def test_cli_table_plots_and_bad_flags(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, out = run_cli(capsys, "--ticks", "300", "--plots", str(tmp_path))
    assert code == 0, out
    assert "backfill" in out and "priority 1" in out
    assert sorted(p.name for p in tmp_path.iterdir()) == ["scheduling-pfn-executing.png", "scheduling-pfn-waits.png"]
    for flags, word in ((["--sizes", "3-x"], "--sizes"), (["--policies", "fifo"], "--policies"), (["--sizes", "1-40"], "sizes")):
        code, out = run_cli(capsys, *flags)
        assert code == 2 and word in out, out
