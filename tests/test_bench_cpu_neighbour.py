"""The cpu_neighbour scenario times the job's loop on one CPU beside each kind of neighbour on the other."""

from __future__ import annotations

import os

import pytest

from bench import common, cpu_neighbour

pytestmark = pytest.mark.skipif(
    not hasattr(os, "sched_setaffinity") or len(os.sched_getaffinity(0)) < 2, reason="needs two CPUs and affinity"
)


def test_every_neighbour_is_timed_in_every_round_and_the_affinity_comes_back(dsn: str) -> None:
    before = os.sched_getaffinity(0)
    result = cpu_neighbour.run(common.Options(dsn=dsn, rows=2_000, seconds=0.2))
    assert os.sched_getaffinity(0) == before
    assert len(result["rounds"]) == cpu_neighbour.ROUNDS
    kinds = set(result["summary"])
    assert {"idle", "spin"} <= kinds
    for r in result["rounds"]:
        assert set(r) == kinds and all(r[k]["jobs"] > 0 for k in kinds)
    assert result["summary"]["idle"]["of_idle"] == 1.0
    assert result["cpus"][0] != result["cpus"][1]
