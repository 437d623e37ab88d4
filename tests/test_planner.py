"""The worker's planner against a real database: budgets, reservations in the registry, quiet rounds, overdue holds."""

from __future__ import annotations

from taskqueue import TaskQueue
from taskqueue.registry import Registry
from taskqueue.scheduling.planner import Planner, RunningTask


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def planner(tq: TaskQueue, policy: str = "backfill", capacity: int = 8) -> tuple[Planner, Clock]:
    reg = Registry(tq, name=f"planner-{policy}", queues=["q"], capacity=capacity, policy=policy, ttl=30.0)
    reg.beat(in_use=0, running=0)
    clock = Clock()
    return Planner(reg, policy=policy, capacity=capacity, queues=["q"], clock=clock), clock


def test_budget_holds_back_for_the_blocked_head_and_records_it(tq: TaskQueue) -> None:
    plan, clock = planner(tq)
    large = tq.enqueue({}, queue="q", priority=0, required=8, estimate=1.0)
    long_small = tq.enqueue({}, queue="q", priority=5, required=2, estimate=10.0)
    short_small = tq.enqueue({}, queue="q", priority=5, required=1, estimate=1.0)
    running = [RunningTask(4, clock.now, 2.0, "q")]  # 4 in use until t+2
    # The large task fits at t+2. The 2 x 10 s task would still run then: skipped
    # by lowering the budget to 1, which the 1 x 1 s task takes.
    assert plan.budget(running, 4) == 1
    assert plan.last is not None and plan.last.start == (short_small,)
    [info] = tq.workers()
    assert info.reservation is not None and info.reservation.task_id == large and info.reservation.required == 8
    assert long_small not in plan.last.start
    claimed = tq.claim_many(available=1, queues=["q"])
    assert [t.id for t in claimed] == [short_small]


def test_quiet_rounds_skip_the_read_until_new_work_arrives(tq: TaskQueue) -> None:
    plan, clock = planner(tq)
    tq.enqueue_many([{"payload": i, "queue": "q", "required": 1} for i in range(3)])
    assert plan.budget([], 8) == 8
    assert plan.budget([], 5) == 5 and plan.rounds == 1  # every task seen fits: greedy, no read
    plan.touch()  # a NOTIFY
    assert plan.budget([], 5) == 5 and plan.rounds == 2
    clock.now += 5.0  # quiet rounds end after QUIET_SECONDS
    assert plan.budget([], 5) == 5 and plan.rounds == 3
    seven = tq.enqueue({}, queue="q", required=7)
    plan.touch()
    running = [RunningTask(2, clock.now, 1.0, "q")]
    # The three small ones come first in claim order and fit; the 7 then waits for t+1.
    assert plan.budget(running, 6) == 6 and plan.reserved is not None and plan.reserved.key == seven
    assert plan.budget(running, 6) == 6 and plan.rounds == 5  # while it holds a reservation, every round reads


def test_a_quiet_round_notices_a_blocked_head_without_its_notify(tq: TaskQueue) -> None:
    # The listener's NOTIFY can come rounds late on a loaded machine: the
    # quiet round's own head read must catch a better task that does not fit.
    plan, clock = planner(tq, capacity=4)
    tq.enqueue_many([{"payload": i, "queue": "q", "priority": 5, "required": 1, "estimate": 1.0} for i in range(2)])
    running = [RunningTask(2, clock.now, 1.0, "q")]
    assert plan.budget(running, 2) == 2 and plan.rounds == 1 and plan.reserved is None
    assert plan.budget(running, 2) == 2 and plan.rounds == 1  # quiet: the head fits, no plan read
    large = tq.enqueue({}, queue="q", priority=0, required=4, estimate=1.0)  # no touch(): its NOTIFY is late
    plan.budget(running, 2)
    assert plan.rounds == 2 and plan.reserved is not None and plan.reserved.key == large


def test_an_overdue_reservation_makes_backfill_hold_strictly(tq: TaskQueue) -> None:
    plan, clock = planner(tq)
    large = tq.enqueue({}, queue="q", priority=0, required=8, estimate=1.0)
    tq.enqueue({}, queue="q", priority=5, required=1, estimate=0.5)
    running = [RunningTask(4, clock.now, 1.0, "q")]  # expected to end at t+1
    assert plan.budget(running, 4) == 4  # the 0.5 s task ends before t+1: backfilled; nothing else waits
    assert plan.reserved is not None and plan.reserved.key == large
    clock.now += 3.0  # the running task overran its estimate; the reservation is overdue
    assert plan.budget(running, 4) == 0
    assert plan.last is not None and plan.last.holding
    plan.forget()
    assert tq.workers()[0].reservation is None


def test_strict_holds_everything_behind_the_blocked_head(tq: TaskQueue) -> None:
    plan, clock = planner(tq, "strict")
    tq.enqueue({}, queue="q", priority=0, required=8, estimate=1.0)
    tq.enqueue({}, queue="q", priority=5, required=1, estimate=0.1)
    assert plan.budget([RunningTask(4, clock.now, 1.0, "q")], 4) == 0
