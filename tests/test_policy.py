"""The policy functions on small hand-made cases, seed 003's worked example first."""

from __future__ import annotations

import pytest

from taskqueue.scheduling.policy import Head, Plan, Reserved, claim_order_pick, plan
from taskqueue.scheduling.profile import Profile

# Seed 003: capacity 8, tasks of size 2 and 4 running. The seed's size-4 job
# shrinks as its steps finish (4, 2, 1); as rectangles that is four running
# tasks whose expected ends give the same spare sequence.
SEED_RUNNING = [(2, 1.0), (2, 2.0), (1, 3.0), (1, 4.0)]


def test_seed_spare_sequence() -> None:
    assert Profile(0.0, 8, SEED_RUNNING).sequence(8) == [2, 4, 6, 7, 8, 8, 8, 8]


def test_seed_size_five_fits_after_two_ticks_and_size_three_after_three() -> None:
    profile = Profile(0.0, 8, SEED_RUNNING)
    assert profile.earliest(5, 1.0) == 2.0
    profile.take(5, 2.0, 1.0)
    assert profile.sequence(5) == [2, 4, 1, 7, 8]
    # The seed's next high-priority job, size 3 for two ticks: not at t=1 (it
    # would still hold 3 at t=2, where 1 is spare) but 3 ticks later.
    assert profile.earliest(3, 2.0) == 3.0
    profile.take(3, 3.0, 2.0)
    assert profile.sequence(6) == [2, 4, 1, 4, 5, 8]


def test_seed_backfill_starts_only_what_cannot_delay_the_reservations() -> None:
    heads = [
        Head(1, 5, 1.0),  # high: reserved at t=2
        Head(2, 3, 2.0),  # high: reserved at t=3 (depth 2)
        Head(4, 1, 3.0),  # low: fits under both reservations: started
        Head(5, 1, 1.0),  # low: ends at t=1: started
    ]
    got = plan("backfill", 8, 0.0, SEED_RUNNING, heads, depth=2)
    assert got == Plan(start=(4, 5), available=2, reservations=(Reserved(1, 5, 2.0), Reserved(2, 3, 3.0)))


def test_a_task_that_would_delay_the_reservation_is_skipped_by_lowering_the_budget() -> None:
    heads = [Head(1, 5, 1.0), Head(3, 2, 3.0), Head(4, 1, 3.0), Head(5, 1, 1.0)]
    got = plan("backfill", 8, 0.0, SEED_RUNNING, heads)
    # Task 3 (2 x 3 ticks) would still hold 2 at t=2, where task 1 needs 5 of the 6 spare.
    # To make the claim skip it the budget drops to 1, which task 4 then takes.
    assert got == Plan(start=(4,), available=1, reservations=(Reserved(1, 5, 2.0),))
    assert claim_order_pick([h.required for h in heads], got.available) == [2]


def test_strict_starts_nothing_past_the_blocked_head() -> None:
    heads = [Head(1, 1, 5.0), Head(2, 6, 1.0), Head(3, 1, 1.0), Head(4, 0, 1.0)]
    got = plan("strict", 8, 0.0, SEED_RUNNING, heads)
    # Task 1 takes 1 of the 2 spare; task 2 (6) fits at t=3 (7 spare, minus task 1's 1 until t=5).
    assert got == Plan(start=(1, 4), available=1, reservations=(Reserved(2, 6, 3.0),), holding=True)


def test_greedy_takes_every_fitting_task_and_reserves_nothing() -> None:
    heads = [Head(1, 5, 1.0), Head(2, 1, 9.0), Head(3, 2, 9.0), Head(4, 1, 9.0)]
    assert plan("greedy", 8, 0.0, SEED_RUNNING, heads) == Plan(start=(2, 4), available=2)


def test_a_task_too_large_for_this_worker_is_neither_reserved_nor_blocking() -> None:
    heads = [Head(1, 9, 1.0), Head(2, 2, 9.0)]
    for policy in ("strict", "backfill"):
        assert plan(policy, 8, 0.0, SEED_RUNNING, heads) == Plan(start=(2,), available=2)


def test_a_task_reserved_by_another_worker_is_left_to_it() -> None:
    heads = [Head(1, 5, 1.0, reserved_elsewhere=True), Head(2, 2, 9.0), Head(3, 6, 1.0)]
    got = plan("backfill", 8, 0.0, SEED_RUNNING, heads)
    # Task 2 starts (nothing of ours reserved yet); task 3 then needs 6 of 8 - 2: at t=4.
    assert got == Plan(start=(2,), available=2, reservations=(Reserved(3, 6, 4.0),))


def test_an_overdue_reservation_holds_back_strictly() -> None:
    heads = [Head(1, 5, 1.0, overdue=True), Head(2, 1, 1.0)]
    got = plan("backfill", 8, 0.0, SEED_RUNNING, heads)
    assert got == Plan(start=(), available=0, reservations=(Reserved(1, 5, 2.0),), holding=True)


def test_truncated_heads_leave_only_capacity_no_reservation_needs() -> None:
    running = [(4, 2.0)]
    heads = [Head(1, 8, 1.0)]
    # 4 spare now; task 1 needs all 8 from t=2 on, so unknown tasks behind it get nothing.
    assert plan("backfill", 8, 0.0, running, heads, truncated=True).available == 0
    assert plan("backfill", 8, 0.0, running, heads, truncated=False).available == 4
    assert plan("backfill", 10, 0.0, running, heads, truncated=True).available == 2


def test_profile_overdue_running_task_frees_just_after_now() -> None:
    profile = Profile(10.0, 8, [(3, 4.0)])
    assert profile.spare[0] == 5 and profile.at(10.001) == 8


@pytest.mark.parametrize("seed", range(200))
def test_plans_are_what_the_claim_takes_and_never_delay_a_reservation(seed: int) -> None:
    import random

    rnd = random.Random(seed)
    capacity = rnd.randint(1, 16)
    running, used = [], 0
    while rnd.random() < 0.7:
        r = rnd.randint(1, capacity)
        if used + r > capacity:
            break
        running.append((r, rnd.uniform(0.0, 10.0)))
        used += r
    heads = [Head(k, rnd.randint(0, capacity + 2), rnd.uniform(0.5, 10.0)) for k in range(rnd.randint(0, 12))]
    for policy in ("greedy", "strict", "backfill"):
        got = plan(policy, capacity, 0.0, running, heads, depth=rnd.randint(1, 3))
        assert 0 <= got.available <= capacity - used
        picked = [heads[i].key for i in claim_order_pick([h.required for h in heads], got.available)]
        assert picked == list(got.start)
        # Starting the plan leaves room for each reservation at its time.
        profile = Profile(0.0, capacity, running)
        by_key = {h.key: h for h in heads}
        for key in got.start:
            profile.take(by_key[key].required, 0.0, by_key[key].estimate)
        for res in got.reservations if policy == "backfill" else ():
            assert profile.fits(res.required, res.start, by_key[res.key].estimate)
            profile.take(res.required, res.start, by_key[res.key].estimate)
