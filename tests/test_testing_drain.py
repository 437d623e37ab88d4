"""taskqueue.testing's drain and assertions, in-process against the plugin's own ``tq`` fixture."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from taskqueue import Permanent, Retry, Task, TaskQueue, Worker
from taskqueue.testing import (
    DrainLimitExceeded,
    aassert_enqueued,
    adrain,
    assert_enqueued,
    assert_not_enqueued,
    drain,
)


def test_drain_runs_each_task_in_claim_order_and_records_results(tq: TaskQueue) -> None:
    worker = Worker()
    seen: list[Any] = []

    @worker.handler("email")
    def send(task: Task) -> dict[str, Any]:
        seen.append(task.payload["to"])
        return {"sent": task.payload["to"]}

    tq.enqueue({"to": "late"}, queue="email", priority=5)
    tq.enqueue({"to": "first"}, queue="email", priority=0)
    result = drain(tq, worker)
    assert seen == ["first", "late"]
    assert [t.result for t in result.completed] == [{"sent": "first"}, {"sent": "late"}]
    assert result.counts() == {"completed": 2, "retried": 0, "failed": 0, "cancelled": 0, "lost": 0}
    assert [t.state for t in tq.tasks()] == ["done", "done"]
    assert_not_enqueued(tq, queue="email")


def test_work_a_handler_enqueues_is_drained_too(tq: TaskQueue) -> None:
    worker = Worker()

    @worker.handler("signup")
    def signup(task: Task) -> None:
        tq.enqueue({"to": task.payload["user"]}, queue="email")

    @worker.handler("email")
    def email(task: Task) -> str:
        return f"welcome {task.payload['to']}"

    tq.enqueue({"user": "ada"}, queue="signup")
    result = drain(tq, worker)
    assert [(t.queue, t.state) for t in result.completed] == [("signup", "done"), ("email", "done")]
    assert result.completed[1].result == "welcome ada"


def test_drain_of_some_queues_leaves_the_others(tq: TaskQueue) -> None:
    worker = Worker()
    worker.handler("a", lambda task: None)
    worker.handler("b", lambda task: None)
    tq.enqueue(1, queue="a")
    tq.enqueue(2, queue="b")
    assert len(drain(tq, worker, ["a"])) == 1
    assert [t.payload for t in assert_enqueued(tq, queue="b")] == [2]


def test_a_raising_handler_is_retried_until_its_attempts_run_out(tq: TaskQueue) -> None:
    worker = Worker()

    @worker.handler("flaky")
    def flaky(task: Task) -> None:
        raise RuntimeError(f"boom on attempt {task.attempts}")

    tq.enqueue({}, queue="flaky", max_attempts=2)
    first = drain(tq, worker)
    # The first failure backs off (scheduled); only with_scheduled runs it now.
    assert [t.state for t in first.retried] == ["scheduled"] and not first.failed
    assert first.runs[0].error is not None and first.runs[0].error.startswith("RuntimeError: boom on attempt 1")
    assert "Traceback" in first.runs[0].error
    second = drain(tq, worker, with_scheduled=True)
    assert [t.error.splitlines()[0] for t in second.failed if t.error] == ["RuntimeError: boom on attempt 2"]
    assert tq.tasks()[0].state == "failed"


def test_retry_and_permanent_follow_the_workers_rules(tq: TaskQueue) -> None:
    worker = Worker()

    @worker.handler("again")
    def again(task: Task) -> str:
        if task.attempts < 2:
            raise Retry(0, "not yet")
        return "second time lucky"

    @worker.handler("never")
    def never(task: Task) -> None:
        raise Permanent("bad input")

    tq.enqueue({}, queue="again")
    tq.enqueue({}, queue="never", max_attempts=5)
    result = drain(tq, worker)
    # Retry(0) queues it again at once; the older id comes first within a priority.
    assert [(r.task.queue, r.outcome, r.error) for r in result.runs] == [
        ("again", "retried", "not yet"),
        ("again", "completed", None),
        ("never", "failed", "Permanent: bad input"),
    ]
    assert result.completed[0].result == "second time lucky"


def test_a_result_that_is_not_json_and_a_queue_without_handler_fail_for_good(tq: TaskQueue) -> None:
    worker = Worker()
    worker.handler("odd", lambda task: {1, 2})
    tq.enqueue({}, queue="odd")
    tq.enqueue({}, queue="nobody")
    result = drain(tq, worker, ["odd", "nobody"])
    errors = [t.error or "" for t in result.failed]
    assert errors[0].startswith("handler returned a value that is not JSON (set)")
    assert errors[1] == f"no handler for queue 'nobody' on worker {worker.name or 'taskqueue.testing.drain'}"


def test_a_task_cancelled_while_it_runs_ends_cancelled(tq: TaskQueue) -> None:
    worker = Worker()

    @worker.handler("q")
    def cancel_self(task: Task) -> None:
        tq.cancel(task.id)

    tq.enqueue({}, queue="q")
    assert [t.state for t in drain(tq, worker).cancelled] == ["cancelled"]


def test_the_drain_respects_the_workers_capacity(tq: TaskQueue) -> None:
    worker = Worker(capacity=2)
    worker.handler("q", lambda task: None)
    tq.enqueue("small", queue="q", required=2)
    tq.enqueue("big", queue="q", required=3)
    assert [t.payload for t in drain(tq, worker).completed] == ["small"]
    assert_enqueued(tq, payload="big", count=1)


def test_a_handler_that_feeds_itself_hits_the_limit(tq: TaskQueue) -> None:
    worker = Worker()
    worker.handler("loop", lambda task: tq.enqueue(task.payload + 1, queue="loop"))
    tq.enqueue(0, queue="loop")
    with pytest.raises(DrainLimitExceeded, match=r"after 5 handler runs .*queue 'loop'"):
        drain(tq, worker, limit=5)
    assert_enqueued(tq, queue="loop", payload=5, state="queued", count=1)  # given back, not left running


def test_async_handlers_run_in_a_sync_drain_and_in_adrain(tq: TaskQueue) -> None:
    worker = Worker()

    @worker.handler("aio")
    async def handle(task: Task) -> int:
        await asyncio.sleep(0)
        return int(task.payload) * 2

    tq.enqueue(1, queue="aio")
    assert [t.result for t in drain(tq, worker).completed] == [2]

    async def in_a_loop() -> list[Any]:
        tq.enqueue(5, queue="aio")
        await aassert_enqueued(tq, queue="aio", payload=5)
        with pytest.raises(TypeError, match="adrain"):
            drain(tq, worker)  # inside a running loop, the sync drain refuses an async handler
        return [t.result for t in (await adrain(tq, worker)).completed]

    assert asyncio.run(in_a_loop()) == [10]


def test_assert_enqueued_matches_filters_and_payload_by_containment(tq: TaskQueue) -> None:
    tq.enqueue({"to": "a@example.com", "subject": "hi"}, queue="email", priority=3, pool="smtp")
    tq.enqueue({"to": "b@example.com"}, queue="email", delay=3600)
    found = assert_enqueued(tq, queue="email", payload={"to": "a@example.com"}, priority=3, pool="smtp")
    assert [t.payload["subject"] for t in found] == ["hi"]
    assert len(assert_enqueued(tq, queue="email", count=2)) == 2  # scheduled counts as enqueued
    assert_enqueued(tq, payload={"to": "b@example.com"}, state="scheduled")
    assert_not_enqueued(tq, queue="sms")
    assert_not_enqueued(tq, payload={"to": "a@example.com"}, state="done")


def test_assertion_failures_say_what_was_wanted_and_what_is_there(tq: TaskQueue) -> None:
    tq.enqueue({"to": "a@example.com"}, queue="email")
    with pytest.raises(AssertionError) as missing:
        assert_enqueued(tq, queue="email", payload={"to": "z@example.com"})
    assert str(missing.value).splitlines() == [
        'no task enqueued with queue=\'email\', payload containing {"to": "z@example.com"}, '
        "state queued or scheduled",
        "the queue holds, queued or scheduled:",
        f"  task {tq.tasks()[0].id}: queue='email' state=queued priority=0 required=0 "
        'payload={"to": "a@example.com"}',
    ]
    with pytest.raises(AssertionError, match=r"expected 2 task\(s\) enqueued with queue='email'.*found 1"):
        assert_enqueued(tq, queue="email", count=2)
    with pytest.raises(AssertionError, match=r"expected no task enqueued with queue='email'.*found 1\nmatching:"):
        assert_not_enqueued(tq, queue="email")
    with pytest.raises(AssertionError, match="the queue holds no task that is done"):
        assert_enqueued(tq, state="done")
