"""bench cpu_split: each phase's CPU a task, split between the client processes and the rest of the machine.

The split is what explains a shape's 8-consumer ratio on two cores, so it
must count the clients' CPU on the clock alone and put the claimed rows back
after every phase, as ``bench shapes`` does.
"""

from __future__ import annotations

import os

import psycopg
import pytest

from bench import common, cpu_split, shape_catalog

pytestmark = pytest.mark.slow

# Half the tasks fit, one queue, claimed in descending order: the kind of shape the scenario is for.
HALF_MAX = shape_catalog.Shape("half_max", "priorities 0..9; required 1..100; half fit",
                               "(g * 31) %% 10", "1 + (g * 7919) %% 100", 50, order="max")


def test_every_phase_reports_its_cpu_a_task_and_puts_the_rows_back(dsn: str) -> None:
    try:
        got = cpu_split.measure(dsn, HALF_MAX, 3000, 0.4)
        with psycopg.connect(dsn) as conn:
            left = conn.execute("SELECT count(*) FROM bench_cpu_split.tasks WHERE state <> 'queued'").fetchone()
    finally:
        common.drop_schema(dsn, cpu_split.SCHEMA)
    assert left == (0,)
    on_linux = os.path.exists("/proc/stat")
    for clients in cpu_split.CLIENT_COUNTS:
        cell = got[f"x{clients}"]
        for side in ("naive", "ours"):
            rounds = cell["rounds"][side]
            assert len(rounds) == cpu_split.ROUNDS
            assert all(r["tasks"] > 0 and r["client_us"] > 0 for r in rounds), rounds
            if on_linux:
                assert all(r["server_us"] is not None and r["server_us"] > 0 for r in rounds), rounds
            assert cell[side]["per_s"] > 0
        assert cell["ratio"] == pytest.approx(cell["ours"]["per_s"] / cell["naive"]["per_s"])
        assert cell["client_ratio"] == pytest.approx(cell["ours"]["client_us"] / cell["naive"]["client_us"])


def test_the_clock_marks_bound_the_clients_work() -> None:
    """run_clients' marks: the machine's busy CPU and the parent's at the clock's two ends, in order."""
    marks: dict[str, tuple[float | None, float]] = {}
    elapsed, results, count = common.run_clients(_count_to_ten, 2, {}, label="marks", total=1.0, marks=marks)
    (busy0, own0), (busy1, own1) = marks["go"], marks["end"]
    assert count == 20 and elapsed > 0
    assert own1 >= own0
    if os.path.exists("/proc/stat"):
        assert busy0 is not None and busy1 is not None and busy1 >= busy0
    assert all(r["cpu_s"] is not None and r["cpu_s"] >= 0 for r in results)


def _count_to_ten(idx: int, args: dict[str, object], counter: object, sync: object) -> dict[str, object]:
    import time

    common.ready(counter, sync)
    for n in range(1, 11):
        counter.value = n  # type: ignore[attr-defined]
    assert common.started_cpu is not None
    return {"count": 10, "cpu_s": time.process_time() - common.started_cpu}
