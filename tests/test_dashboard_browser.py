"""The dashboard in a real browser: Debian's Chromium, driven by Selenium through chromium-driver.

In CI (``CI`` or ``TASKQUEUE_REQUIRE_BROWSER`` set; ``.ci/run`` installs
Chromium and sets it) a missing browser fails these tests. Elsewhere they are
skipped with the reason, so the rest of the suite runs on a machine without
Chromium. Screenshots of each page go to ``$TASKQUEUE_SCREENSHOTS`` (the docs
use ``docs/img``), else to a temporary directory.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from taskqueue import TaskQueue
from tests.support import browser
from tests.support.dashboard import serve

pytestmark = pytest.mark.browser
WAIT = 15.0  # upper bound for "eventually"; the pages refresh every 0.5 s here

_missing = browser.missing()
if _missing is not None:
    if os.environ.get("CI") or os.environ.get("TASKQUEUE_REQUIRE_BROWSER"):
        pytest.fail(f"browser tests must run in CI, but {_missing}", pytrace=False)
    pytest.skip(f"no browser here: {_missing}", allow_module_level=True)

from selenium.common.exceptions import (
    NoSuchElementException,
    StaleElementReferenceException,
)
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions as ec
from selenium.webdriver.support.select import Select
from selenium.webdriver.support.ui import WebDriverWait


@pytest.fixture(scope="module")
def driver() -> Iterator[Any]:
    with browser.chromium() as d:
        yield d


@pytest.fixture(scope="module")
def shots(tmp_path_factory: pytest.TempPathFactory) -> Path:
    target = os.environ.get("TASKQUEUE_SCREENSHOTS")
    path = Path(target) if target else tmp_path_factory.mktemp("screenshots")
    path.mkdir(parents=True, exist_ok=True)
    return path


@pytest.fixture
def site(tq: TaskQueue) -> Iterator[str]:
    from taskqueue.dashboard import create_app

    with serve(create_app(tq, cache_seconds=0.0, check_seconds=0.0, poll_seconds=0.5)) as base:
        yield base


def wait(driver: Any, condition: Any) -> Any:
    # htmx swaps whole fragments: an element read a moment ago may be gone; look again.
    ignored = (NoSuchElementException, StaleElementReferenceException)
    return WebDriverWait(driver, WAIT, poll_frequency=0.05, ignored_exceptions=ignored).until(condition)


def text(driver: Any, css: str) -> str:
    return str(driver.find_element(By.CSS_SELECTOR, css).text)


def populate(tq: TaskQueue) -> dict[str, int]:
    """A small, varied queue: several queues and priorities, pools, two workers, failures, history."""
    ids: dict[str, int] = {}
    tq.set_pool_limit("net-10.0.1.0/24", 2)
    tq.set_pool_limit("smtp", 5)
    for i in range(12):
        tq.enqueue({"host": f"10.0.1.{i}", "ports": [22, 443]}, queue="scan", priority=i % 3, required=2,
                   pool="net-10.0.1.0/24")
    for i in range(6):
        tq.enqueue({"to": f"user{i}@example.com", "template": "welcome"}, queue="mail", priority=5, pool="smtp")
    for i in range(3):
        tq.enqueue({"report": f"daily-{i}"}, queue="reports", priority=-1, delay=1800)
    for task in tq.claim_many(queues=["scan"], worker="scanner-1:4711", limit=2):
        ids.setdefault("running", task.id)
    for task in tq.claim_many(queues=["mail"], worker="mailer-2:4712", limit=3):
        tq.complete(task, {"sent": True})
    for n in range(3):
        task_id = tq.enqueue({"invoice": 100 + n}, queue="billing", max_attempts=1)
        task = tq.claim(queues=["billing"], worker="mailer-2:4712")
        assert task is not None and task.id == task_id
        tq.fail(task, f"TimeoutError: payment gateway did not answer within {30 + n} s")
        ids.setdefault("failed", task_id)
    task_id = tq.enqueue({"invoice": 7}, queue="billing", max_attempts=3)
    tq.fail(tq.claim(queues=["billing"], worker="mailer-2:4712"), "ConnectionResetError: peer reset", retry_in=600)
    ids["retrying"] = task_id
    ids["queued"] = tq.enqueue({"to": "ops@example.com", "template": "digest"}, queue="mail", priority=2)
    return ids


def test_overview_updates_without_a_reload(driver: Any, site: str, tq: TaskQueue, shots: Path) -> None:
    populate(tq)
    driver.get(site + "/")
    assert driver.title.startswith("Overview")
    before = int(text(driver, "#total-queued"))
    driver.execute_script("window.__sameDocument = true")
    tq.enqueue({}, queue="mail")
    wait(driver, lambda d: int(text(d, "#total-queued")) == before + 1)
    assert driver.execute_script("return window.__sameDocument") is True
    assert text(driver, "#invariants") == "all hold"
    assert len(driver.find_elements(By.CSS_SELECTOR, "#throughput rect")) == 60
    driver.save_screenshot(str(shots / "dashboard-overview.png"))


def test_a_new_task_appears_in_the_list_without_a_reload(driver: Any, site: str, tq: TaskQueue, shots: Path) -> None:
    populate(tq)
    driver.get(site + "/tasks")
    driver.execute_script("window.__sameDocument = true")
    new_id = tq.enqueue({"fresh": True}, queue="mail", priority=1)
    row = wait(driver, ec.presence_of_element_located((By.ID, f"task-{new_id}")))
    assert "mail" in row.text
    assert driver.execute_script("return window.__sameDocument") is True
    driver.save_screenshot(str(shots / "dashboard-tasks.png"))


def test_filter_the_task_list(driver: Any, site: str, tq: TaskQueue) -> None:
    ids = populate(tq)
    driver.get(site + "/tasks")
    Select(driver.find_element(By.ID, "filter-state")).select_by_value("failed")
    wait(driver, lambda d: "state=failed" in d.current_url)
    wait(driver, lambda d: {r.get_attribute("class") for r in d.find_elements(By.CSS_SELECTOR, "#task-list tbody tr")}
         == {"state-failed"})
    rows = driver.find_elements(By.CSS_SELECTOR, "#task-list tbody tr")
    assert len(rows) == 3 and f"task-{ids['failed']}" in {r.get_attribute("id") for r in rows}
    Select(driver.find_element(By.ID, "filter-state")).select_by_value("")
    queue = driver.find_element(By.ID, "filter-queue")
    queue.send_keys("reports")
    driver.find_element(By.ID, "apply-filters").click()
    wait(driver, lambda d: "queue=reports" in d.current_url)
    wait(driver, lambda d: len(d.find_elements(By.CSS_SELECTOR, "#task-list tbody tr.state-scheduled")) == 3)
    assert len(driver.find_elements(By.CSS_SELECTOR, "#task-list tbody tr")) == 3


def test_open_a_task_from_the_list(driver: Any, site: str, tq: TaskQueue, shots: Path) -> None:
    ids = populate(tq)
    driver.get(site + "/tasks?queue=scan&state=running")
    driver.find_element(By.LINK_TEXT, str(ids["running"])).click()
    wait(driver, lambda d: d.current_url.endswith(f"/tasks/{ids['running']}"))
    assert text(driver, "#task-state") == "running"
    fields = text(driver, "#fields")
    assert "scanner-1:4711" in fields and "net-10.0.1.0/24" in fields
    assert '"host": "10.0.1.' in text(driver, "#payload")
    driver.save_screenshot(str(shots / "dashboard-task.png"))


def test_change_a_pool_limit(driver: Any, site: str, tq: TaskQueue, shots: Path) -> None:
    populate(tq)
    driver.get(site + "/pools")
    row = driver.find_element(By.CSS_SELECTOR, 'tr[data-pool="smtp"]')
    box = row.find_element(By.NAME, "limit")
    box.clear()
    box.send_keys("9")
    row.find_element(By.TAG_NAME, "button").click()
    wait(driver, lambda d: "smtp" in text(d, "#notice"))
    assert text(driver, 'tr[data-pool="smtp"] td.limit') == "9"
    assert tq.pool("smtp").limit == 9
    driver.save_screenshot(str(shots / "dashboard-pools.png"))


def test_cancel_a_task(driver: Any, site: str, tq: TaskQueue) -> None:
    ids = populate(tq)
    driver.get(site + f"/tasks/{ids['queued']}")
    driver.find_element(By.ID, "cancel").click()
    wait(driver, ec.alert_is_present()).accept()  # hx-confirm asks first
    wait(driver, lambda d: text(d, "#task-state") == "cancelled")
    assert tq.get(ids["queued"]).state == "cancelled"


def test_retry_a_failed_task(driver: Any, site: str, tq: TaskQueue, shots: Path) -> None:
    ids = populate(tq)
    driver.get(site + "/failures")
    driver.save_screenshot(str(shots / "dashboard-failures.png"))
    driver.get(site + f"/tasks/{ids['failed']}")
    driver.find_element(By.ID, "retry").click()
    wait(driver, lambda d: text(d, "#task-state") == "queued")
    assert "fresh attempt budget" in text(driver, "#notice")
    task = tq.get(ids["failed"])
    assert (task.state, task.attempts) == ("queued", 0)


def test_bulk_retry_from_a_failure_group(driver: Any, site: str, tq: TaskQueue) -> None:
    populate(tq)
    driver.get(site + "/failures")
    driver.find_element(By.PARTIAL_LINK_TEXT, "payment gateway").click()
    wait(driver, lambda d: len(d.find_elements(By.CSS_SELECTOR, "input[name=ids]")) == 3)
    boxes = driver.find_elements(By.CSS_SELECTOR, "input[name=ids]")
    chosen = [int(b.get_attribute("value")) for b in boxes[:2]]
    for box in boxes[:2]:
        box.click()
    driver.find_element(By.ID, "retry-selected").click()
    wait(driver, lambda d: "2 changed" in text(d, "#notice"))
    assert [tq.get(i).state for i in chosen] == ["queued", "queued"]
    assert len(driver.find_elements(By.CSS_SELECTOR, "input[name=ids]")) == 1


def test_workers_page(driver: Any, site: str, tq: TaskQueue, shots: Path) -> None:
    import threading

    from taskqueue import Worker
    from tests.support.polling import wait_for
    from tests.test_worker import running

    populate(tq)
    release = threading.Event()
    worker = Worker(queues=["thumbnails"], capacity=8, lease=5.0, poll_interval=30.0, grace=1.0,
                    name="render-3:5120", maintenance=False)

    @worker.handler("thumbnails")
    def thumbnail(task: Any) -> None:
        release.wait(30)

    for i in range(3):
        tq.enqueue({"image": f"photo-{i}.jpg"}, queue="thumbnails", required=2)
    try:
        with running(worker, tq):
            assert wait_for(lambda: any(w.name == "render-3:5120" and w.in_use == 6 for w in tq.workers()))
            driver.get(site + "/workers")
            row = text(driver, 'tr[data-worker="render-3:5120"]')
            assert "thumbnails" in row and "live" in row
            assert "scanner-1:4711" in text(driver, "#holders")
            driver.save_screenshot(str(shots / "dashboard-workers.png"))
            release.set()
    finally:
        release.set()


def test_markup_in_a_payload_or_error_is_shown_as_text(driver: Any, site: str, tq: TaskQueue) -> None:
    script = "<script>window.__xss = 'script'</script>"
    image = "<img src=x onerror=\"window.__xss = 'onerror'\">"
    task_id = tq.enqueue({"note": script, "html": image}, queue="inbox", max_attempts=1)
    tq.fail(tq.claim(queues=["inbox"], worker="w"), f"{script}{image}")
    for path in (f"/tasks/{task_id}", "/tasks", "/failures", "/"):
        driver.get(site + path)
        assert driver.execute_script("return window.__xss") is None, path
        assert driver.find_elements(By.CSS_SELECTOR, "main img") == [], path
    driver.get(site + f"/tasks/{task_id}")
    assert script in text(driver, "#payload") and image.replace('"', '\\"') in text(driver, "#payload")
    assert text(driver, "#error") == script + image
