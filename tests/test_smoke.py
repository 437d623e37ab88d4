from taskqueue import TaskQueue


def test_enqueue_then_claim_round_trip(tq: TaskQueue) -> None:
    task_id = tq.enqueue({"hello": "world"}, priority=3, required=2)
    task = tq.claim(available=2)
    assert task is not None and task.id == task_id
    assert task.state == "running" and task.attempts == 1
    tq.complete(task, {"ok": True})
    done = tq.get(task_id)
    assert done is not None and done.state == "done" and done.result == {"ok": True}
