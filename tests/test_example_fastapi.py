"""The FastAPI example, tested as its users would test it: with taskqueue's pytest plugin.

``taskqueue_database`` is the plugin's fresh, migrated database for this test;
``drain`` runs the app's own Worker handlers in-process; ``assert_enqueued``
looks at what the request left in the queue.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from examples.fastapi_app import create_app
from taskqueue import TaskQueue
from taskqueue.testing import assert_enqueued, assert_not_enqueued, drain
from tests.support.polling import wait_for


@pytest.fixture
def client_without_worker(taskqueue_database: str) -> Iterator[TestClient]:
    with TestClient(create_app(taskqueue_database, run_worker=False)) as client:
        yield client


def test_a_signup_and_its_welcome_task_commit_together_and_drain(
    client_without_worker: TestClient, taskqueue_database: str
) -> None:
    client = client_without_worker
    created = client.post("/signups", json={"email": "ada@example.org"})
    assert created.status_code == 201, created.text
    signup_id, task_id = created.json()["id"], created.json()["task_id"]
    with TaskQueue(taskqueue_database) as tq:
        [task] = assert_enqueued(tq, queue="welcome", payload={"signup_id": signup_id, "email": "ada@example.org"})
        assert task.id == task_id
        result = drain(tq, client.app.state.worker)  # type: ignore[attr-defined]
        assert [t.id for t in result.completed] == [task_id]
        assert_not_enqueued(tq, queue="welcome")
    assert client.get(f"/signups/{signup_id}").json()["welcomed"] is True
    assert client.get(f"/tasks/{task_id}").json() == {
        "id": task_id, "state": "done", "result": {"sent_to": "ada@example.org"},
    }


def test_a_duplicate_signup_is_refused_and_enqueues_nothing(
    client_without_worker: TestClient, taskqueue_database: str
) -> None:
    client = client_without_worker
    assert client.post("/signups", json={"email": "bo@example.org"}).status_code == 201
    again = client.post("/signups", json={"email": "bo@example.org"})
    assert again.status_code == 409 and "already signed up" in again.json()["detail"]
    with TaskQueue(taskqueue_database) as tq:
        assert_enqueued(tq, queue="welcome", count=1)  # the first signup's only: the refused one rolled back


def test_the_in_process_worker_welcomes_on_the_apps_own_loop(taskqueue_database: str) -> None:
    with TestClient(create_app(taskqueue_database)) as client:
        ids = [client.post("/signups", json={"email": f"user{n}@example.org"}).json()["id"] for n in range(5)]
        assert wait_for(
            lambda: all(client.get(f"/signups/{i}").json()["welcomed"] for i in ids), timeout=30
        ), "the worker in the app's lifespan never ran the welcome tasks"
    with TaskQueue(taskqueue_database) as tq:
        assert tq.stats().by_state["done"] == 5
        assert_not_enqueued(tq)
