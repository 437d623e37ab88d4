"""Claims and completions in batches: the claimer waits while enough is claimed, the completer for company.

A worker of 1 ms handlers used to claim the few tasks freed since its last
claim and to write the few outcomes finished since its last write, each a
round trip and a commit (docs/performance.md, Drain). These tests pin the
rules that batch both, and that neither waits when something depends on it:
a NOTIFY (an urgent task), a pool slot, the worker's resource capacity.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from taskqueue import Task, TaskQueue
from taskqueue.worker.capacity import ASYNC, SYNC, Capacity
from taskqueue.worker.claimer import Claimer
from taskqueue.worker.completer import Completer
from taskqueue.worker.outcome import new_report
from taskqueue.worker.pace import ROUND_TRIPS_AHEAD, Pace
from tests.test_worker import WAIT, new_worker, running


def _paced(pace: Pace, claim: float = 0.001, gap: float = 0.0001) -> None:
    """A claim round trip of ``claim`` seconds and a handler finished every ``gap`` seconds, as if measured.

    The claim time is set, not averaged in: the claims a test makes on a real
    database measure their own round trips, which would move it.
    """
    pace.claim_seconds = claim
    if pace.gap_seconds is None:
        for i in range(50):
            pace.finished(100.0 + i * gap)


def test_the_runway_is_a_claim_round_trips_worth_of_waiting_claims() -> None:
    pace = Pace(4)
    assert pace.runway() is None  # nothing measured yet
    _paced(pace)  # 1 ms claims, a handler done every 100 µs
    assert pace.runway() in (9, 10)  # 1 ms / 100 µs
    assert ROUND_TRIPS_AHEAD * 10 - 1 <= pace.ahead() <= ROUND_TRIPS_AHEAD * 10  # three round trips' worth


def _paced_claims(tq: TaskQueue, ahead: int) -> tuple[list[Task], Capacity, list[bool]]:
    """``ahead`` more claims than the runway, added to a paced capacity whose wake-ups are recorded."""
    tq.enqueue_many([{"payload": i} for i in range(14)])
    tasks = tq.claim_many(limit=14, worker="batch-test")
    woken: list[bool] = []
    cap = Capacity(None, 4, on_free=lambda: woken.append(True))
    _paced(cap.pace)
    runway = cap.pace.runway()
    assert runway is not None and runway + ahead <= 14
    cap.add_all(tasks[: runway + ahead], time.monotonic())
    return tasks, cap, woken


def test_a_put_off_claim_is_due_when_the_waiting_drop_to_the_runway(tq: TaskQueue) -> None:
    """The claimer is woken when threads take claims up, not only when handlers finish."""
    tasks, cap, woken = _paced_claims(tq, 3)
    assert not cap.put_off(ASYNC)  # the async handlers' times are not known yet
    assert cap.put_off()  # three more than the runway wait
    cap.begin(tasks[0])
    cap.begin(tasks[1])
    assert not woken  # still one more than the runway
    cap.begin(tasks[2])
    assert woken == [True]  # due now, though no handler finished
    cap.begin(tasks[3])
    assert woken == [True]  # once
    assert not cap.put_off()


def test_a_finished_handler_does_not_wake_a_put_off_claim(tq: TaskQueue) -> None:
    """While a claim is put off, only begin() wakes the claimer (at the runway); a freed thread does not.

    Woken for every finished handler, the claimer looked, put the claim off
    again and slept: with async CPU-bound handlers, 0.72 voluntary context
    switches a task on its thread alone (docs/performance.md, Drain).
    """
    tasks, cap, woken = _paced_claims(tq, 4)
    assert cap.put_off()
    cap.begin(tasks[0])
    cap.start_finishing(tasks[0])
    assert not woken  # three more than the runway still wait: nothing to claim yet
    for task in tasks[1:4]:
        cap.begin(task)
    assert woken == [True]  # due at the runway
    cap.start_finishing(tasks[1])
    assert woken == [True, True]  # no longer put off: a freed thread wakes the claimer again
    cap.remove_all([tasks[0], tasks[1]])
    assert woken == [True, True, True]  # a recorded outcome always does


def test_a_recorded_batch_does_not_wake_a_put_off_claim_until_the_worker_closes(tq: TaskQueue) -> None:
    """Woken by every recorded batch, the claimer only put its claim off again (async CPU-bound handlers)."""
    tasks, cap, woken = _paced_claims(tq, 4)
    assert cap.put_off()
    cap.begin(tasks[0])
    cap.start_finishing(tasks[0])
    cap.remove_all([tasks[0]])
    assert not woken  # still put off: nothing to claim for yet
    cap.close()
    cap.begin(tasks[1])
    cap.start_finishing(tasks[1])
    cap.remove_all([tasks[1]])
    assert woken == [True]  # winding down: every end wakes the wait for the last outcomes
    budget: list[bool] = []
    bounded = Capacity(100, 4, on_free=lambda: budget.append(True))
    _paced(bounded.pace)
    runway = bounded.pace.runway()
    assert runway is not None
    bounded.add_all(tasks[2 : 2 + runway + 4], time.monotonic())
    assert bounded.put_off()
    bounded.begin(tasks[2])
    bounded.start_finishing(tasks[2])
    bounded.remove_all([tasks[2]])
    assert budget == [True]  # a resource budget freed may let the other kind claim: always woken


def test_a_low_claim_ahead_limit_still_leaves_batches(tq: TaskQueue) -> None:
    tq.enqueue_many([{"payload": i} for i in range(4)])
    tasks = tq.claim_many(limit=4, worker="batch-test")
    cap = Capacity(None, 2, on_free=lambda: None, claim_ahead=6)  # 6 ahead at most, though 30 would be worth it
    _paced(cap.pace)
    cap.add_all(tasks[:2], time.monotonic())
    assert not cap.put_off()  # 2 waiting: a third of the limit, claim now
    cap.add_all(tasks[2:], time.monotonic())
    assert cap.put_off()  # 4 waiting: more than a third of the limit


def test_capacity_counts_the_claims_waiting_for_a_handler(tq: TaskQueue) -> None:
    tq.enqueue_many([{"payload": i} for i in range(4)])
    tasks = tq.claim_many(limit=4, worker="batch-test")
    cap = Capacity(None, 1, on_free=lambda: None, async_concurrency=2)
    cap.add_all(tasks[:3], time.monotonic(), SYNC)
    cap.add_all(tasks[3:], time.monotonic(), ASYNC)
    assert (cap.waiting(SYNC), cap.waiting(ASYNC)) == (3, 1)
    cap.begin(tasks[0])
    cap.begin(tasks[0])  # once only
    assert cap.waiting(SYNC) == 2
    cap.remove(tasks[1])  # ended before its handler began (given back, say): it no longer waits
    cap.remove(tasks[0])  # ended after it began: counted once
    assert cap.waiting(SYNC) == 1
    cap.begin(tasks[3])
    assert (cap.waiting(SYNC), cap.waiting(ASYNC)) == (1, 0)


def _claimer(tq: TaskQueue, cap: Capacity, submitted: list[Task]) -> Claimer:
    return Claimer(
        tq, cap, queues=["default"], worker="batch-test", lease=30.0, poll_interval=1.0, wake=threading.Event(),
        submit=submitted.append, listening=threading.Event(), ready=threading.Event(), halt=threading.Event(),
    )


def test_the_claimer_skips_a_round_while_enough_waits_unless_notified(tq: TaskQueue) -> None:
    tq.enqueue_many([{"payload": i} for i in range(200)])
    cap = Capacity(None, 2, on_free=lambda: None)
    submitted: list[Task] = []
    c = _claimer(tq, cap, submitted)
    first, asked, _ = c.claim()
    assert asked == 2 and len(first) == 2  # nothing measured yet: the free threads only
    _paced(cap.pace)  # then: 1 ms claims, a handler done every 100 µs, so about 30 held ahead
    ahead = cap.pace.ahead()
    assert 29 <= ahead <= 30
    more, asked, _ = c.claim()
    assert asked == ahead and len(more) == ahead
    held = first + more
    for task in held[:20]:  # 20 handlers ran; 11 or 12 claims wait, over a millisecond of work
        cap.begin(task)
        cap.start_finishing(task)
        cap.remove(task)
    assert cap.waiting() == len(held) - 20
    _paced(cap.pace)
    assert c.claim()[1] == 0  # 20 free in the window, yet nothing asked: the next claim can wait
    _paced(cap.pace)
    urgent, asked, _ = c.claim(notified=True)  # an enqueue was announced: it may be urgent, so claim now
    assert asked == 20 and len(urgent) == 20
    for task in held[20:] + urgent[:15]:
        cap.begin(task)
        cap.start_finishing(task)
        cap.remove(task)
    assert cap.waiting() == 5  # 0.5 ms of work left: less than a claim, so the claimer claims
    _paced(cap.pace)
    later, asked, _ = c.claim()
    assert asked > 0 and len(later) == asked


def _completer(tq: TaskQueue, cap: Capacity) -> Completer:
    return Completer(tq, cap, worker="batch-test")


def test_an_outcome_waits_for_company_only_when_nothing_waits_on_its_commit(tq: TaskQueue) -> None:
    tq.set_pool_limit("net", 5)
    tq.enqueue_many([{"payload": i} for i in range(2)])
    tq.enqueue({"pooled": True}, pool="net")
    tasks = tq.claim_many(limit=3, worker="batch-test")
    plain, pooled = [t for t in tasks if t.pool is None], next(t for t in tasks if t.pool is not None)
    cap = Capacity(None, 4, on_free=lambda: None)
    cap.add_all(tasks, time.monotonic())
    completer = _completer(tq, cap)
    assert completer._may_wait(new_report(plain[0], "batch-test"))  # others still run: more will come
    assert not completer._may_wait(new_report(pooled, "batch-test"))  # its pool slot: write at once
    for task in tasks:
        cap.start_finishing(task)
    assert not completer._may_wait(new_report(plain[0], "batch-test"))  # no handler left to wait for
    bounded = Capacity(10, 4, on_free=lambda: None)
    bounded.add_all(plain, time.monotonic())
    assert not _completer(tq, bounded)._may_wait(new_report(plain[0], "batch-test"))  # capacity waits on it


def test_the_wait_for_company_grows_while_handlers_finish_far_apart(tq: TaskQueue) -> None:
    """About COMPANY outcomes a batch: a wait of COALESCE_SECONDS gathered 5 of 1 ms handlers' outcomes."""
    from taskqueue.worker.completer import COALESCE_SECONDS, COMPANY, MAX_COALESCE_SECONDS

    def wait(sync_gap: float | None, async_gap: float | None = None) -> float:
        cap = Capacity(None, 4, on_free=lambda: None, async_concurrency=10)
        if sync_gap is not None:
            _paced(cap.pace, gap=sync_gap)
        if async_gap is not None:
            _paced(cap.async_pace, gap=async_gap)
        return _completer(tq, cap)._wait_seconds()

    assert wait(None) == COALESCE_SECONDS  # nothing measured yet
    assert wait(0.0001) == COALESCE_SECONDS  # fast handlers fill a batch within it
    assert wait(0.001) == pytest.approx(COMPANY * 0.001)  # 1 ms apart: 16 ms
    assert wait(0.01) == MAX_COALESCE_SECONDS  # never longer
    assert wait(0.001, 0.001) == pytest.approx(COMPANY * 0.0005)  # both kinds finish: twice the rate
    assert COALESCE_SECONDS < COMPANY * 0.001 <= MAX_COALESCE_SECONDS


def _claimed_with_a_pooled_task(tq: TaskQueue, plain: int) -> tuple[list[Task], Task, Completer]:
    """``plain`` claimed tasks with no pool, one in a pool, and a completer whose handlers all still run."""
    tq.set_pool_limit("net", 5)
    tq.enqueue_many([{"payload": i} for i in range(plain)])
    tq.enqueue({"pooled": True}, pool="net")
    tasks = tq.claim_many(limit=plain + 1, worker="batch-test")
    cap = Capacity(None, 4, on_free=lambda: None)
    cap.add_all(tasks, time.monotonic())
    pooled = next(t for t in tasks if t.pool is not None)
    return [t for t in tasks if t.pool is None], pooled, _completer(tq, cap)


def test_a_pooled_outcome_ends_the_wait(tq: TaskQueue, monkeypatch: Any) -> None:
    """A batch waiting for company is written as soon as an outcome holding a pool slot joins it."""
    from taskqueue.worker import completer as completer_mod

    plain, pooled, completer = _claimed_with_a_pooled_task(tq, 2)
    monkeypatch.setattr(completer_mod, "COALESCE_SECONDS", 0.2)
    started = time.monotonic()
    batch, _ = completer._gather(new_report(plain[0], "batch-test"))
    assert [r.task.id for r in batch] == [plain[0].id] and time.monotonic() - started >= 0.2  # it waited
    monkeypatch.setattr(completer_mod, "COALESCE_SECONDS", 60.0)  # a wait nobody would sit out
    completer._inbox.put(new_report(pooled, "batch-test"))
    started = time.monotonic()
    batch, stop = completer._gather(new_report(plain[1], "batch-test"))
    assert time.monotonic() - started < WAIT and not stop
    assert [r.task.id for r in batch] == [plain[1].id, pooled.id]


def test_the_wait_for_company_is_one_sleep_that_keeps_what_arrives(tq: TaskQueue, monkeypatch: Any) -> None:
    """Plain outcomes that arrive during the wait join the batch without ending it; a pooled one ends it."""
    from taskqueue.worker import completer as completer_mod

    plain, pooled, completer = _claimed_with_a_pooled_task(tq, 3)
    monkeypatch.setattr(completer_mod, "COALESCE_SECONDS", 0.3)
    later = threading.Timer(0.05, completer.submit, (new_report(plain[1], "batch-test"),))
    later.start()
    started = time.monotonic()
    batch, stop = completer._gather(new_report(plain[0], "batch-test"))
    later.join()
    assert time.monotonic() - started >= 0.3 and not stop  # the plain outcome did not cut the wait short
    assert [r.task.id for r in batch] == [plain[0].id, plain[1].id]  # and joined the batch
    monkeypatch.setattr(completer_mod, "COALESCE_SECONDS", 60.0)  # a wait nobody would sit out
    later = threading.Timer(0.05, completer.submit, (new_report(pooled, "batch-test"),))
    later.start()
    started = time.monotonic()
    batch, stop = completer._gather(new_report(plain[2], "batch-test"))
    later.join()
    assert time.monotonic() - started < WAIT and not stop  # its pool slot ended the wait
    assert [r.task.id for r in batch] == [plain[2].id, pooled.id]
    completer._urgent.set()  # left set by an earlier pooled outcome: the next wait ends at once, nothing lost
    batch, stop = completer._gather(new_report(plain[0], "batch-test"))
    assert [r.task.id for r in batch] == [plain[0].id] and not stop


def test_a_worker_of_short_handlers_claims_and_records_in_batches(tq: TaskQueue) -> None:
    """400 handlers of 1 ms on 4 threads: few claims and few commits, every task done once.

    Claiming what the freed threads could take and writing what had finished,
    the same drain took 116 claim rounds and 139 commits (most of 1 to 4
    tasks); now it takes about 9 and 16.
    """
    n = 400
    worker = new_worker(concurrency=4)
    ran: list[int] = []

    def handle(task: Task) -> None:
        time.sleep(0.001)
        ran.append(task.id)

    worker.handler("default", handle)
    ids = tq.enqueue_many([{"payload": i} for i in range(n)])
    rounds: list[int] = []
    batches: list[dict[int, Any]] = []
    with running(worker, tq):
        left = set(ids)
        while left:
            batches.append(worker.signals.recorded.wait(WAIT))
            left -= {i for i, state in batches[-1].items() if state == "done"}
        while True:  # every claim round so far that took something
            try:
                got = worker.signals.claimed.wait(0)
            except TimeoutError:
                break
            if got:
                rounds.append(len(got))
    assert sorted(ran) == sorted(ids)
    assert sum(rounds) == n
    assert len(rounds) <= 40, rounds
    assert len(batches) <= 50, [len(b) for b in batches]


def test_the_claim_loop_claims_at_once_after_a_notify_even_while_enough_waits(tq: TaskQueue) -> None:
    """The loop clears the NOTIFY mark before its round, so the round is told of it: no put-off claim then."""
    from taskqueue.worker.service import WorkerSignals

    tq.enqueue_many([{"payload": i} for i in range(100)])
    cap = Capacity(None, 4, on_free=lambda: None, claim_ahead=0)
    signals = WorkerSignals()
    signals.init()
    c = Claimer(
        tq, cap, queues=["default"], worker="batch-test", lease=30.0, poll_interval=30.0, wake=threading.Event(),
        submit=lambda task: None, listening=threading.Event(), ready=threading.Event(), halt=threading.Event(),
        signals=signals,
    )
    held, _, _ = c.claim()
    cap.begin(held[0])
    cap.start_finishing(held[0])
    cap.remove(held[0])  # one thread free; three claims wait, 3 ms of work against 1 ms claims
    _paced(cap.pace, claim=0.001, gap=0.001)
    cap.pace.claimed = lambda seconds: None  # type: ignore[method-assign]  # keep the times set above
    assert cap.put_off()
    c.wake.set()  # a freed thread: the round asks nothing
    c.start()
    try:
        assert signals.claimed.wait(WAIT) == []
        c.notified.set()  # as the listener does on a NOTIFY
        c.wake.set()
        urgent = signals.claimed.wait(WAIT)
        assert len(urgent) == 1  # the free thread is filled at once
    finally:
        c.stop()
