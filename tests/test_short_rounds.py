"""After a NOTIFY during a large claim round, the next round is short, so an urgent task waits for a short claim."""

from __future__ import annotations

import threading

from taskqueue import TaskQueue
from taskqueue.worker.capacity import Capacity
from taskqueue.worker.claimer import SHORT_ROUND, Claimer


def claimer(tq: TaskQueue, submitted: list[int], threads: int = 40) -> Claimer:
    return Claimer(
        tq, Capacity(None, threads, on_free=lambda: None, claim_ahead=0), queues=["default"], worker="short-test",
        lease=30.0, poll_interval=1.0, wake=threading.Event(), submit=lambda t: submitted.append(t.id),
        listening=threading.Event(), ready=threading.Event(), halt=threading.Event(),
    )


def test_a_notify_during_a_large_round_caps_the_next_one(tq: TaskQueue) -> None:
    submitted: list[int] = []
    c = claimer(tq, submitted)
    tq.enqueue_many([{"payload": i} for i in range(100)])
    tasks, asked, full = c.claim()
    assert asked == 40 and len(tasks) == 40 and full
    assert c.next_cap(asked) is None  # no NOTIFY came: the next round is as large as the budget
    c.notified.set()  # the listener saw an enqueue during that round
    cap = c.next_cap(asked)
    assert cap == SHORT_ROUND
    urgent = tq.enqueue({"urgent": True}, priority=-1)
    more = claimer(tq, submitted)  # a fresh budget of 40 threads: only the cap limits the round
    tasks, asked, _ = more.claim(cap)
    assert asked == SHORT_ROUND and len(tasks) == SHORT_ROUND and tasks[0].id == urgent
    assert more.next_cap(asked) is None  # a short round is never followed by another because of the same NOTIFY


def test_a_small_round_is_not_shortened(tq: TaskQueue) -> None:
    c = claimer(tq, [], threads=4)
    tq.enqueue_many([{"payload": i} for i in range(10)])
    _, asked, _ = c.claim()
    c.notified.set()
    assert asked == 4 and c.next_cap(asked) is None


def test_the_workers_listener_marks_a_notify_for_its_claimer(tq: TaskQueue) -> None:
    from tests.support.polling import wait_for
    from tests.test_worker import new_worker, running

    worker = new_worker(queues=["other"])
    worker.handler("other", lambda task: None)
    marks: list[bool] = []

    def record(w: object) -> None:  # the claimer clears the mark each round: count the sets instead
        event = worker.claimer.notified  # type: ignore[union-attr]
        real = event.set
        event.set = lambda: (marks.append(True), real())[1]  # type: ignore[method-assign]

    worker.on_services.append(record)
    with running(worker, tq):
        before = len(marks)
        tq.enqueue({}, queue="other")
        assert wait_for(lambda: len(marks) > before)
