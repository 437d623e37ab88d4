"""The dashboard's pages and actions over httpx, against a real PostgreSQL."""

from __future__ import annotations

import re

import pytest

from taskqueue import TaskQueue
from tests.support.dashboard import dashboard_client, post, text_of
from tests.support.polling import sql, wait_for


def fail_once(tq: TaskQueue, queue: str, error: str, *, max_attempts: int = 1, **spec: object) -> int:
    """Enqueue a task, claim it and fail it: failed when max_attempts is 1, else retrying."""
    task_id = tq.enqueue({"q": queue}, queue=queue, max_attempts=max_attempts, **spec)
    task = tq.claim(queues=[queue], worker="test-worker")
    assert task is not None and task.id == task_id
    tq.fail(task, error, retry_in=3600)
    return task_id


def test_overview_shows_depth_waiting_and_invariants(tq: TaskQueue) -> None:
    for priority in (1, 1, 5):
        tq.enqueue({}, queue="mail", priority=priority)
    tq.enqueue({}, queue="mail", delay=3600)
    tq.enqueue({}, queue="video")
    assert tq.claim(queues=["video"], worker="w1") is not None
    fail_once(tq, "mail", "boom 1")
    with dashboard_client(tq) as client:
        page = client.get("/")
    assert page.status_code == 200
    html = page.text
    assert text_of(html, "total-queued") == "3"
    assert text_of(html, "total-scheduled") == "1"
    assert text_of(html, "total-running") == "1"
    assert text_of(html, "total-failed") == "1"
    assert text_of(html, "invariants") == "all hold"
    waiting = html[html.index('id="waiting"'):]
    assert re.search(r"<td>mail</td><td class=\"num\">1</td><td class=\"num\">2</td>", waiting)
    assert re.search(r"<td>mail</td><td class=\"num\">5</td><td class=\"num\">1</td>", waiting)
    assert 'id="throughput"' in html and html.count("<rect ") == 60


def test_overview_fragment_is_the_polled_part(tq: TaskQueue) -> None:
    with dashboard_client(tq) as client:
        before = client.get("/fragments/overview").text
        tq.enqueue({}, queue="q")
        after = client.get("/fragments/overview").text
    assert "<html" not in after and 'hx-trigger="every 2.0s"' in after
    assert text_of(before, "total-queued") == "0" and text_of(after, "total-queued") == "1"


def test_task_list_filters_by_state_queue_priority_and_pool(tq: TaskQueue) -> None:
    a = tq.enqueue({}, queue="a", priority=1, pool="p1")
    b = tq.enqueue({}, queue="a", priority=7)
    c = tq.enqueue({}, queue="b", priority=3, pool="p1")
    d = fail_once(tq, "b", "x")
    with dashboard_client(tq) as client:
        def ids(query: str) -> list[int]:
            response = client.get(f"/tasks?{query}")
            assert response.status_code == 200, response.text
            return [int(i) for i in re.findall(r'<tr id="task-(\d+)"', response.text)]

        assert ids("") == [d, c, b, a]
        assert ids("queue=a") == [b, a]
        assert ids("state=failed") == [d]
        assert ids("state=queued&queue=b") == [c]
        assert ids("pool=p1") == [c, a]
        assert ids("priority_min=2&priority_max=7") == [c, b]
        assert ids("priority_min=8") == []
        assert client.get("/tasks?state=bogus").status_code == 400
        assert client.get("/tasks?priority_min=x").status_code == 400


def test_task_list_pages_by_keyset(tq: TaskQueue) -> None:
    all_ids = tq.enqueue_many([{"payload": {"i": i}} for i in range(120)])
    pages: list[str] = []
    with dashboard_client(tq) as client:
        url = "/tasks"
        while url:
            pages.append(client.get(url).text)
            older = re.search(r'id="older" href="([^"]+)"', pages[-1])
            url = older.group(1).replace("&amp;", "&") if older else ""
    seen = [int(i) for html in pages for i in re.findall(r'<tr id="task-(\d+)"', html)]
    assert seen == sorted(all_ids, reverse=True)
    assert [html.count('<tr id="task-') for html in pages] == [50, 50, 20]
    # Only the newest page refreshes itself; older pages hold still while one reads them.
    live = ['hx-trigger' in html.split('id="task-list"')[1].split(">")[0] for html in pages]
    assert live == [True, False, False]


def test_search_by_id_and_task_page(tq: TaskQueue) -> None:
    task_id = tq.enqueue({"to": "a@example.com"}, queue="mail", pool="smtp")
    with dashboard_client(tq) as client:
        found = client.get(f"/tasks?id={task_id}")
        assert found.status_code == 303 and found.headers["location"].endswith(f"/tasks/{task_id}")
        assert client.get("/tasks?id=abc").status_code == 400
        page = client.get(f"/tasks/{task_id}")
        assert client.get("/tasks/999999").status_code == 404
        assert client.get("/tasks/0").status_code == 400
    assert page.status_code == 200
    assert text_of(page.text, "task-state") == "queued"
    assert "a@example.com" in text_of(page.text, "payload")
    assert "created" in text_of(page.text, "timeline")
    assert 'id="cancel"' in page.text and 'id="retry"' not in page.text


def test_cancel_from_the_task_page(tq: TaskQueue) -> None:
    task_id = tq.enqueue({}, queue="q")
    with dashboard_client(tq) as client:
        response = post(client, f"/tasks/{task_id}/cancel")
        assert response.status_code == 303 and response.headers["location"].endswith(f"/tasks/{task_id}?done=cancelled")
        assert tq.get(task_id).state == "cancelled"
        again = post(client, f"/tasks/{task_id}/cancel", follow=True)
    assert "Nothing to cancel" in text_of(again.text, "notice")


def test_retry_a_failed_task_from_the_task_page(tq: TaskQueue) -> None:
    task_id = fail_once(tq, "q", "boom")
    with dashboard_client(tq) as client:
        assert 'id="retry"' in client.get(f"/tasks/{task_id}").text
        response = post(client, f"/tasks/{task_id}/retry", follow=True)
    assert "fresh attempt budget" in text_of(response.text, "notice")
    task = tq.get(task_id)
    assert (task.state, task.attempts, task.max_attempts) == ("queued", 0, 1)


def test_pool_limit_edit(tq: TaskQueue) -> None:
    tq.enqueue({}, queue="q", pool="net-1")
    with dashboard_client(tq) as client:
        assert 'data-pool="net-1"' in client.get("/pools").text
        response = post(client, "/pools/limit", {"pool": "net-1", "limit": "3"}, follow=True)
        assert tq.pool("net-1").limit == 3
        assert "net-1" in text_of(response.text, "notice")
        post(client, "/pools/limit", {"pool": "net-1", "limit": ""})
        assert tq.pool("net-1").limit is None
        bad = post(client, "/pools/limit", {"pool": "net-1", "limit": "-2"})
        assert bad.status_code == 400 and tq.pool("net-1").limit is None
        new = post(client, "/pools/limit", {"pool": "fresh", "limit": "0"})
        assert new.status_code == 303 and tq.pool("fresh").limit == 0


def test_failures_grouped_by_error_with_bulk_retry_and_cancel(tq: TaskQueue) -> None:
    failed = [fail_once(tq, "q", f"TimeoutError: host 10.0.0.{n} did not answer") for n in (1, 2, 3)]
    other = fail_once(tq, "q", "ValueError: bad")
    retrying = [fail_once(tq, "r", f"flaky {n}", max_attempts=3) for n in (1, 2)]
    with dashboard_client(tq) as client:
        html = client.get("/failures").text
        assert "TimeoutError: host N.N.N.N did not answer" in html
        rows = re.findall(r'<td class="num">(\d+)</td>', html)
        assert sorted(map(int, rows)) == [1, 2, 3]
        group = {"kind": "failed", "fingerprint": "TimeoutError: host N.N.N.N did not answer"}
        page = client.get("/failures/group", params=group).text
        assert sorted(int(i) for i in re.findall(r'id="failure-(\d+)"', page)) == failed
        one = post(client, "/failures/bulk", {**group, "one": str(failed[0])})
        assert one.status_code == 303 and "acted=1" in one.headers["location"]
        assert tq.get(failed[0]).state == "queued" and tq.get(failed[1]).state == "failed"
        post(client, "/failures/bulk", {**group, "scope": "group"})
        assert [tq.get(i).state for i in failed] == ["queued"] * 3
        assert tq.get(other).state == "failed"
        selected = post(client, "/failures/bulk", {"kind": "retrying", "fingerprint": "flaky N", "ids": [str(retrying[1])]})
        assert selected.status_code == 303
        assert [tq.get(i).state for i in retrying] == ["scheduled", "cancelled"]
        assert post(client, "/failures/bulk", {"kind": "nope", "fingerprint": "x", "scope": "group"}).status_code == 400


def test_workers_page_lists_the_registry_and_other_lease_holders(tq: TaskQueue) -> None:
    import threading

    from taskqueue import Worker
    from tests.test_worker import running

    release = threading.Event()
    worker = Worker(queues=["scan"], capacity=6, lease=5.0, poll_interval=30.0, grace=1.0, name="scanner-9",
                    maintenance=False)

    @worker.handler("scan")
    def scan(task: object) -> None:
        release.wait(30)

    held = tq.enqueue({}, queue="scan", required=4)
    ids = [tq.enqueue({}, queue="q", required=2) for _ in range(2)]
    assert len(tq.claim_many(queues=["q"], worker="box-7", limit=2)) == 2
    try:
        with running(worker, tq):
            assert wait_for(lambda: any(w.name == "scanner-9" and w.in_use == 4 for w in tq.workers()))
            with dashboard_client(tq) as client:
                html = client.get("/workers").text
            release.set()
    finally:
        release.set()
    row = html[html.index('data-worker="scanner-9"'):]
    row = row[:row.index("</tr>")]
    assert '<td>scan</td>' in row and '<td class="num">6</td>' in row and '<td class="num">4</td>' in row
    assert f'href="/tasks/{held}"' in row and "live" in row
    holders = html[html.index('id="holders"'):]
    assert re.search(r'<td>box-7</td><td class="num">2</td><td class="num">4</td>', holders)
    assert all(f'href="/tasks/{i}"' in holders for i in ids)


def test_rescue_action(tq: TaskQueue, dsn: str) -> None:
    tq.enqueue({}, queue="q")
    task = tq.claim(queues=["q"], worker="gone", lease=0.05)
    assert task is not None
    # The lease must be in the past by the database clock.
    assert wait_for(lambda: sql(dsn, "SELECT lease_expires_at < now() FROM taskqueue.tasks WHERE id = %s", task.id)[0][0])
    with dashboard_client(tq) as client:
        response = post(client, "/rescue")
    assert "rescued 1 expired lease" in response.text
    assert tq.get(task.id).state == "queued"


def test_read_only_shows_no_action_and_refuses_every_post(tq: TaskQueue) -> None:
    task_id = tq.enqueue({}, queue="q", pool="p")
    failed = fail_once(tq, "f", "boom")
    with dashboard_client(tq, read_only=True) as client:
        page = client.get(f"/tasks/{task_id}").text
        assert 'id="cancel"' not in page and "read-only" in page
        assert "new limit" not in client.get("/pools").text
        assert 'id="rescue"' not in client.get("/").text
        refused = [
            post(client, f"/tasks/{task_id}/cancel"),
            post(client, f"/tasks/{failed}/retry"),
            post(client, "/pools/limit", {"pool": "p", "limit": "1"}),
            post(client, "/failures/bulk", {"kind": "failed", "fingerprint": "boom", "scope": "group"}),
            post(client, "/rescue"),
        ]
    assert [r.status_code for r in refused] == [403] * 5
    assert tq.get(task_id).state == "queued" and tq.get(failed).state == "failed"
    assert tq.pool("p").limit is None


def test_mounted_under_a_prefix_links_stay_inside_it(tq: TaskQueue) -> None:
    import httpx
    from starlette.applications import Starlette
    from starlette.routing import Mount

    from taskqueue.dashboard import create_app
    from tests.support.dashboard import serve

    task_id = tq.enqueue({}, queue="q")
    outer = Starlette(routes=[Mount("/ops/queue", app=create_app(tq))])
    with serve(outer) as base, httpx.Client(base_url=base) as client:
        html = client.get("/ops/queue/tasks").text
        assert f'href="/ops/queue/tasks/{task_id}"' in html
        assert 'src="/ops/queue/static/htmx.min.js"' in html
        assert client.get("/ops/queue/static/htmx.min.js").status_code == 200
        found = client.get(f"/ops/queue/tasks?id={task_id}", follow_redirects=False)
        assert found.headers["location"] == f"{base}/ops/queue/tasks/{task_id}"


@pytest.mark.parametrize("payload", [
    {"html": "<script>alert(1)</script>"},
    {"img": "<img src=x onerror=alert(1)>"},
])
def test_payload_markup_is_escaped(tq: TaskQueue, payload: dict[str, str]) -> None:
    task_id = tq.enqueue(payload, queue="q")
    with dashboard_client(tq) as client:
        page = client.get(f"/tasks/{task_id}").text
        listing = client.get("/tasks").text
    for html in (page, listing):
        assert "<script>alert" not in html and "<img src=x" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page or "&lt;img src=x onerror=alert(1)&gt;" in page
