"""Claiming ahead of the handler threads, and threads freed before the outcome commits."""

from __future__ import annotations

import time

import pytest

from taskqueue import TaskQueue
from taskqueue.worker.capacity import Capacity
from taskqueue.worker.pace import MAX_AHEAD, ROUND_TRIPS_AHEAD, Pace


def test_nothing_is_claimed_ahead_until_both_times_are_measured() -> None:
    pace = Pace(10)
    assert pace.ahead() == 0
    pace.claimed(0.005)
    assert pace.ahead() == 0  # no handler has finished yet
    pace.finished(100.0)
    assert pace.ahead() == 0  # one finish is not a gap


def test_cheap_handlers_are_claimed_three_round_trips_ahead_within_the_limit() -> None:
    assert ROUND_TRIPS_AHEAD == 3
    pace = Pace(10)
    pace.claimed(0.001)
    for i in range(50):
        pace.finished(100.0 + i * 0.0001)  # one handler done every 100 µs, worker-wide
    assert 27 <= pace.ahead() <= 33  # 3 x 1 ms / 100 µs
    fast = Pace(10)
    fast.claimed(0.5)
    for i in range(50):
        fast.finished(100.0 + i * 0.0001)
    assert fast.ahead() == min(MAX_AHEAD, fast.limit)
    assert Pace(1).limit < MAX_AHEAD  # a one-thread worker never holds MAX_AHEAD claims


def test_slow_handlers_are_not_claimed_ahead() -> None:
    pace = Pace(10)
    pace.claimed(0.005)
    for i in range(20):
        pace.finished(100.0 + i * 0.5)  # a handler done every half second
    assert pace.ahead() == 0


def test_a_thread_is_free_when_its_handler_returns_while_its_claim_still_counts(tq: TaskQueue) -> None:
    tq.enqueue_many([{"payload": i, "required": 3} for i in range(2)])
    tasks = tq.claim_many(limit=2, worker="pace-test")
    assert len(tasks) == 2
    freed: list[bool] = []
    cap = Capacity(10, 2, on_free=lambda: freed.append(True))
    cap.add_all(tasks, time.monotonic())
    assert cap.free() == (4, 0)
    cap.start_finishing(tasks[0])  # handler returned, outcome not committed yet
    assert freed  # the claimer is woken at once
    assert cap.free() == (4, 1)  # its thread is free; its 3 units still count
    assert cap.unsettled() == 2
    cap.remove(tasks[0])  # outcome committed
    assert cap.free() == (7, 1)
    assert cap.threads_busy() == 1


def test_outcomes_in_flight_are_bounded(tq: TaskQueue) -> None:
    tq.enqueue_many([{"payload": i} for i in range(3)])
    tasks = tq.claim_many(limit=3, worker="pace-test")
    cap = Capacity(None, 1, on_free=lambda: None)
    for task in tasks[:2]:
        cap.add_all([task], time.monotonic())
        cap.start_finishing(task)
    # One thread, both handlers returned, neither outcome committed: no more claims until one is.
    assert cap.free() == (None, 0)
    cap.remove(tasks[0])
    assert cap.free() == (None, 1)


def test_the_gap_the_threads_could_reach_counts_too() -> None:
    """1 ms handlers on 10 threads finish one every 100 µs at full speed. Seen only
    at the pace the worker runs now (held back: one every 300 µs), the claim-ahead
    would keep it there; the handlers' own time lifts it."""
    held_back = Pace(10)
    held_back.claimed(0.003)
    for i in range(50):
        held_back.finished(100.0 + i * 0.0003)
    assert 27 <= held_back.ahead() <= 33  # 3 x 3 ms / 300 µs
    lifted = Pace(10)
    lifted.claimed(0.003)
    for i in range(50):
        lifted.finished(100.0 + i * 0.0003, ran=0.001)
    assert 87 <= lifted.ahead() <= 93  # 3 x 3 ms / (1 ms / 10 threads)
    slow = Pace(10)
    slow.claimed(0.003)
    for i in range(50):
        slow.finished(100.0 + i * 0.0003, ran=5.0)  # long handlers: the measured gap still decides
    assert slow.ahead() == held_back.ahead()


def test_claim_ahead_sets_the_limit_and_zero_claims_only_for_free_threads() -> None:
    wide = Pace(10, limit=500)
    wide.claimed(0.5)
    for i in range(50):
        wide.finished(100.0 + i * 0.0001)
    assert wide.ahead() == 500  # 0.5 s / 100 µs is 5000: the given limit holds, not MAX_AHEAD
    cap = Capacity(None, 4, on_free=lambda: None, claim_ahead=0)
    cap.pace.claimed(0.5)
    for i in range(50):
        cap.pace.finished(100.0 + i * 0.0001)
    assert cap.free() == (None, 4)  # nothing beyond the four threads


def test_claim_ahead_is_validated_before_anything_runs() -> None:
    from taskqueue import ValidationError, Worker

    for bad in (-1, 1.5, "10", True, 100_001):
        with pytest.raises(ValidationError, match="claim_ahead"):
            Worker(claim_ahead=bad)  # type: ignore[arg-type]
    assert Worker(claim_ahead=0).claim_ahead == 0
    assert Worker().configure(claim_ahead=300).claim_ahead == 300


def test_an_inline_batch_is_a_tenth_of_a_second_of_handlers_within_the_limit() -> None:
    from taskqueue.worker.pace import INLINE_BATCH_SECONDS

    assert INLINE_BATCH_SECONDS == 0.1
    capacity = Capacity(None, 1, on_free=lambda: None, inline=True)
    assert capacity.free() == (None, 1)  # a handler's time unknown: one task, not a hundred minute-long ones
    for i in range(30):
        capacity.pace.finished(100.0 + i, ran=0.004)
    assert capacity.free() == (None, 25)  # 0.1 s / 4 ms
    for i in range(80):
        capacity.pace.finished(200.0 + i, ran=0.00001)
    assert capacity.free() == (None, MAX_AHEAD)  # cheap handlers: the claim-ahead limit bounds it
    assert not capacity.put_off()  # the lane claims only between batches: never put off
    slow = Capacity(None, 1, on_free=lambda: None, inline=True, claim_ahead=5)
    slow.pace.finished(1.0, ran=30.0)
    assert slow.free() == (None, 1)  # minute-long handlers: one at a time
    for i in range(80):
        slow.pace.finished(100.0 + i, ran=0.00001)
    assert slow.free() == (None, 5)  # claim_ahead caps the batch
