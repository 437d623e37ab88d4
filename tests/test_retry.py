"""``TaskQueue.retry`` and ``taskqueue retry``: a failed task runs again with a fresh attempt budget."""

from __future__ import annotations

import pytest

from taskqueue import DuplicateTask, TaskQueue, ValidationError
from tests.test_cli import assert_one_line_error, run_cli
from tests.support.apis import tq  # noqa: F401  (the contract runs against both APIs)


def failed_task(tq: TaskQueue, queue: str = "q", *, max_attempts: int = 2, **spec: object) -> int:
    task_id = tq.enqueue({"n": 1}, queue=queue, max_attempts=max_attempts, **spec)
    for _ in range(max_attempts):
        task = tq.claim(queues=[queue], worker="w")
        assert task is not None and task.id == task_id
        tq.fail(task, "boom", retry_in=0)
    assert tq.get(task_id).state == "failed"
    return task_id


def test_retry_requeues_with_a_fresh_attempt_budget_and_runs_again(tq: TaskQueue) -> None:
    task_id = failed_task(tq, max_attempts=2)
    assert tq.retry(task_id) is True
    task = tq.get(task_id)
    assert (task.state, task.attempts, task.max_attempts, task.finished_at) == ("queued", 0, 2, None)
    assert task.error == "boom"  # kept for the record until the next attempt ends
    again = tq.claim(queues=["q"], worker="w")
    assert again is not None and again.id == task_id and again.attempts == 1
    tq.complete(again, {"ok": True})
    assert tq.get(task_id).state == "done"
    assert tq.check().ok


def test_retry_of_a_task_that_is_not_failed_changes_nothing(tq: TaskQueue) -> None:
    queued = tq.enqueue({}, queue="q")
    done = tq.enqueue({}, queue="d")
    tq.complete(tq.claim(queues=["d"], worker="w"))
    assert tq.retry(queued) is False
    assert tq.retry(done) is False
    assert tq.retry(987654) is False
    assert tq.get(queued).state == "queued" and tq.get(done).state == "done"


@pytest.mark.parametrize("bad", [0, -1, "7", 1.5, None, True])
def test_retry_validates_the_id(tq: TaskQueue, bad: object) -> None:
    with pytest.raises(ValidationError, match="task_id"):
        tq.retry(bad)  # type: ignore[arg-type]


def test_retry_refuses_to_duplicate_a_live_dedupe_key(tq: TaskQueue) -> None:
    task_id = failed_task(tq, max_attempts=1, dedupe_key="invoice-7")
    holder = tq.enqueue({}, queue="q", dedupe_key="invoice-7")
    assert holder != task_id
    with pytest.raises(DuplicateTask, match="invoice-7"):
        tq.retry(task_id)
    assert tq.get(task_id).state == "failed"


def test_retry_into_a_full_pool_waits_for_a_slot(tq: TaskQueue) -> None:
    task_id = failed_task(tq, max_attempts=1, pool="one")
    tq.set_pool_limit("one", 1)
    blocker = tq.enqueue({}, queue="b", pool="one")
    assert tq.claim(queues=["b"], worker="w").id == blocker
    assert tq.retry(task_id)
    assert tq.claim(queues=["q"], worker="w") is None
    assert tq.check().ok


def test_cli_retry(dsn: str, tq: TaskQueue) -> None:
    task_id = failed_task(tq, max_attempts=3)
    result = run_cli("retry", str(task_id), dsn=dsn)
    assert result.returncode == 0, result.stderr
    assert f"task {task_id} is queued again with 3 attempts" in result.stdout
    assert tq.get(task_id).state == "queued"
    assert_one_line_error(run_cli("retry", str(task_id), dsn=dsn), 1, "only a failed task can be retried")
    assert_one_line_error(run_cli("retry", "999999", dsn=dsn), 1, "no task 999999")
