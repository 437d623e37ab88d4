"""The random shapes' draw: ``--wide`` adds parts without changing what a seed's plain draw is."""

from __future__ import annotations

import random

import pytest

from bench import common, versions
from bench.random_shapes import WIDE_LOW_SHARE, WIDE_QUEUES, draw, drawn


def _plain(seed: int, count: int = 30) -> list:
    rng = random.Random(seed)
    return [draw(rng, i) for i in range(count)]


def _wide(seed: int, count: int = 30) -> list:
    rng = random.Random(seed)
    return [draw(rng, i, random.Random(f"wide:{seed}:{i}")) for i in range(count)]


def test_a_seeds_plain_draw_is_what_earlier_runs_recorded() -> None:
    names = [shape.name for shape, _, _ in _plain(5)]
    # Two shapes of docs/performance.md's fifth draw (random_shapes_0051_seed5).
    assert names[12] == "r12_negative_lognormal_0.5_max_q40l20"
    assert names[17] == "r17_hundreds_lognormal_0.3_max_q100"


def test_the_wide_draw_keeps_every_plain_part() -> None:
    for seed in (1, 5, 9):
        for (plain, share, per_claim), (wide, wide_share, _) in zip(_plain(seed), _wide(seed), strict=True):
            assert not per_claim
            assert (wide.priority, wide.required, wide.order, wide.pools) == (
                plain.priority, plain.required, plain.order, plain.pools)
            assert wide_share == share
            assert wide.name.startswith("w") and plain.name.startswith("r")
            if (wide.queues, wide.listed) != (plain.queues, plain.listed):
                assert (wide.queues, wide.listed) in WIDE_QUEUES


def test_the_wide_draw_is_the_same_every_time_and_draws_its_parts() -> None:
    first, again = _wide(7, 60), _wide(7, 60)
    assert [s.name for s, _, _ in first] == [s.name for s, _, _ in again]
    layouts = {(s.queues, s.listed) for s, _, _ in first}
    assert layouts & set(WIDE_QUEUES), "no wide queue layout in 60 draws"
    per_claim = [(s, share) for s, share, p in first if p]
    assert per_claim, "no amount drawn per claim in 60 draws"
    assert all(share > WIDE_LOW_SHARE and "_avar" in s.name for s, share in per_claim)
    assert all("_avar" not in s.name for s, _, p in first if not p)


def test_drawn_picks_shapes_by_prefix_from_the_whole_draw() -> None:
    every = drawn(9, 30, False, None)
    assert [s.name for s, _, _ in every] == [s.name for s, _, _ in _plain(9)]
    picked = drawn(9, 30, False, "r1,r11")
    assert [s.name for s, _, _ in picked] == ["r1_desc_id_priority_linked_0.5_max_pools", "r11_distinct_mb_1_max_pools"]
    assert [s.name for s, _, _ in drawn(8, 30, True, "w4")] == ["w4_negative_zero_mix_0.5_max_pools_q1000"]


@pytest.mark.parametrize(("only", "message"), [
    (None, "name the drawn shapes with --only"),
    ("r1,r99", "no shape of draw 9 is named r99"),
])
def test_versions_refuses_a_draw_it_cannot_name_whole(only: str | None, message: str) -> None:
    opts = common.Options(dsn="postgresql://nowhere.invalid/x", rows=None, seconds=None, old="claim_tasks.v41",
                          seed=9, only=only)
    with pytest.raises(SystemExit, match=message):
        versions.run(opts)
