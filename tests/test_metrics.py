"""``/metrics``: every family scraped with known values, from the dashboard and from a worker."""

from __future__ import annotations

import datetime as dt
import threading
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from taskqueue import LeaseLost, TaskQueue, Worker
from taskqueue.metrics import WorkerMetrics
from tests.support.dashboard import dashboard_client
from tests.support.polling import sql, wait_for
from tests.test_acceptance import log, workers  # noqa: F401 - fixtures
from tests.test_worker import running


def scrape(text: str) -> dict[str, dict[tuple[tuple[str, str], ...], float]]:
    """{sample name: {sorted labels: value}} of an exposition."""
    samples: dict[str, dict[tuple[tuple[str, str], ...], float]] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            samples.setdefault(s.name, {})[tuple(sorted(s.labels.items()))] = s.value
    return samples


def one(samples: dict[str, Any], name: str, **labels: str) -> float:
    return samples[name][tuple(sorted(labels.items()))]


def test_dashboard_metrics_report_every_family_with_known_values(tq: TaskQueue, dsn: str) -> None:
    now = sql(dsn, "SELECT now()")[0][0]
    # Waiting in queue m: one per priority band, the oldest due an hour ago.
    for priority in (-5, 0, 0, 5, 50, 500):
        tq.enqueue({}, queue="m", priority=priority, run_at=now - dt.timedelta(hours=1) if priority == -5 else None)
    tq.enqueue({}, queue="m", delay=3600)
    # Queue w: three claims; one completes, one fails and backs off, one keeps running.
    for _ in range(3):
        tq.enqueue({}, queue="w", required=2)
    done, retried, _held = tq.claim_many(queues=["w"], worker="box-1", limit=3)
    tq.complete(done)
    tq.fail(retried, "flaky", retry_in=3600)
    with pytest.raises(LeaseLost):
        tq.complete(done)  # a second completion: a lost lease
    # Queue f: one failure stays failed, one is retried by an operator.
    for _ in range(2):
        tq.enqueue({}, queue="f", max_attempts=1)
    stays, back = tq.claim_many(queues=["f"], worker="box-2", limit=2)
    tq.fail(stays, "boom")
    tq.fail(back, "boom")
    assert tq.retry(back.id)
    # Queue r: a lease that expires and is rescued.
    tq.enqueue({}, queue="r")
    tq.claim(queues=["r"], worker="gone", lease=0.01)
    assert wait_for(lambda: sql(dsn, "SELECT count(*) FROM taskqueue.tasks WHERE queue = 'r' AND lease_expires_at < now()")[0][0] == 1)
    assert tq.rescue_expired() == 1
    # Pool pp, limit 1: one running, the other parked by the next claim.
    tq.set_pool_limit("pp", 1)
    tq.enqueue({}, queue="p", pool="pp")
    tq.enqueue({}, queue="p", pool="pp")
    assert tq.claim(queues=["p"], worker="box-3") is not None
    assert tq.claim(queues=["p"], worker="box-3") is None
    parked = sql(dsn, "SELECT count(*) FROM taskqueue.tasks WHERE parked")[0][0]

    with dashboard_client(tq) as client:
        response = client.get("/metrics")
    assert response.status_code == 200 and response.headers["content-type"].startswith("text/plain")
    m = scrape(response.text)

    depth = {labels: v for labels, v in m["taskqueue_tasks"].items()}
    expected_depth = {
        ("m", "queued", "<0"): 1, ("m", "queued", "0"): 2, ("m", "queued", "1-9"): 1, ("m", "queued", "10-99"): 1,
        ("m", "queued", ">=100"): 1, ("m", "scheduled", "0"): 1,
        ("w", "running", "0"): 1, ("w", "scheduled", "0"): 1,
        ("f", "failed", "0"): 1, ("f", "queued", "0"): 1,
        ("r", "queued", "0"): 1,
        ("p", "running", "0"): 1, ("p", "queued", "0"): 1,
    }
    assert depth == {(("priority_band", b), ("queue", q), ("state", s)): n for (q, s, b), n in expected_depth.items()}
    oldest = one(m, "taskqueue_oldest_waiting_seconds", queue="m")
    assert 3600 <= oldest < 3600 + 300
    assert one(m, "taskqueue_oldest_waiting_seconds", queue="w") == 0
    assert one(m, "taskqueue_claims_total", queue="w") == 3
    assert one(m, "taskqueue_claims_total", queue="f") == 2
    assert one(m, "taskqueue_claims_total", queue="r") == 1
    assert one(m, "taskqueue_claims_total", queue="p") == 1
    assert one(m, "taskqueue_completions_total", queue="w") == 1
    assert one(m, "taskqueue_failures_total", queue="w") == 1
    assert one(m, "taskqueue_failures_total", queue="f") == 2
    assert one(m, "taskqueue_retries_total", queue="w", kind="backoff") == 1
    assert one(m, "taskqueue_retries_total", queue="f", kind="operator") == 1
    assert one(m, "taskqueue_rescues_total") == 1
    assert one(m, "taskqueue_lost_leases_total") == 1
    assert one(m, "taskqueue_claim_latency_seconds_count", queue="w") == 3
    assert one(m, "taskqueue_claim_latency_seconds_bucket", queue="w", le="+Inf") == 3
    assert one(m, "taskqueue_claim_latency_seconds_sum", queue="w") >= 0
    assert one(m, "taskqueue_pool_running", pool="pp") == 1
    assert one(m, "taskqueue_pool_limit", pool="pp") == 1
    assert parked == 1 and one(m, "taskqueue_pool_parked", pool="pp") == 1
    assert one(m, "taskqueue_worker_capacity_in_use", worker="box-1") == 2
    assert one(m, "taskqueue_worker_running_tasks", worker="box-1") == 1
    assert one(m, "taskqueue_worker_running_tasks", worker="box-3") == 1
    # done (1) and failed (1) finished within the hour; the retried one is live again.
    assert one(m, "taskqueue_finished_last_hour") == 2
    assert one(m, "taskqueue_metrics_collect_seconds") > 0


def test_scrapes_within_the_cache_interval_read_the_database_once(tq: TaskQueue) -> None:
    with dashboard_client(tq, cache_seconds=3600) as client:
        first = scrape(client.get("/metrics").text)
        tq.enqueue({}, queue="late")
        second = scrape(client.get("/metrics").text)
    assert first["taskqueue_summary_read_seconds"] == second["taskqueue_summary_read_seconds"]
    assert "taskqueue_tasks" not in second or all(dict(k)["queue"] != "late" for k in second["taskqueue_tasks"])


def test_worker_metrics_port_serves_counters_capacity_and_leader_gauges(tq: TaskQueue) -> None:
    seen = threading.Event()
    worker = Worker(queues=["job"], capacity=5, lease=5.0, poll_interval=30.0, grace=1.0, name="metrics-worker",
                    maintenance_interval=0.05)

    @worker.handler("job")
    def job(task: Any) -> str:
        seen.set()
        return "ok"

    ids = [tq.enqueue({}, queue="job", required=1) for _ in range(4)]
    tq.enqueue({}, queue="job", delay=3600)
    metrics = WorkerMetrics(worker, tq, cache_seconds=0.0)
    port = metrics.start(0)
    try:
        with running(worker, tq):
            assert wait_for(lambda: all(tq.get(i).state == "done" for i in ids))
            assert wait_for(lambda: worker.maintainer is not None and worker.maintainer.leader.is_leader)
            m = scrape(httpx.get(f"http://127.0.0.1:{port}/metrics").text)
            # The dashboard reads the same worker from the registry.
            with dashboard_client(tq) as client:
                d = scrape(client.get("/metrics").text)
    finally:
        metrics.stop()
    assert seen.is_set()
    assert one(m, "taskqueue_claims_total", queue="job") == 4
    assert one(m, "taskqueue_completions_total", queue="job") == 4
    assert one(m, "taskqueue_worker_capacity", worker="metrics-worker") == 5
    assert one(m, "taskqueue_worker_capacity_in_use", worker="metrics-worker") == 0
    # This worker leads maintenance, so it also reports the queue-wide gauges.
    assert one(m, "taskqueue_finished_last_hour") == 4
    assert one(m, "taskqueue_tasks", queue="job", state="scheduled", priority_band="0") == 1
    assert one(m, "taskqueue_oldest_waiting_seconds", queue="job") == 0
    assert one(d, "taskqueue_worker_capacity", worker="metrics-worker") == 5
    assert one(d, "taskqueue_worker_capacity_in_use", worker="metrics-worker") == 0


def test_the_grafana_dashboard_uses_only_families_we_export(tq: TaskQueue) -> None:
    import json
    import re
    from pathlib import Path

    from taskqueue.insights import read_summary
    from taskqueue.metrics import QueueCollector

    text = (Path(__file__).resolve().parents[1] / "docs" / "grafana-dashboard.json").read_text()
    json.loads(text)
    used = {re.sub(r"_(bucket|total|count|sum)$", "", name) for name in re.findall(r"taskqueue_[a-z_]+", text)}
    collector = QueueCollector(summary=lambda: read_summary(tq), counters=tq.counters, local_workers=list)
    exported = {family.name for family in collector.collect()}
    assert used and used <= exported, used - exported


def test_cli_worker_serves_metrics_on_its_port(tq: TaskQueue, workers: Any) -> None:
    import re

    proc = workers.start("worker", "--metrics-port", "0")
    found = wait_for(lambda: re.search(r"metrics on http://127\.0\.0\.1:(\d+)/metrics", workers.stderr(proc)) is not None)
    assert found, workers.stderr(proc)
    port = int(re.search(r"metrics on http://127\.0\.0\.1:(\d+)/metrics", workers.stderr(proc)).group(1))
    task_id = tq.enqueue({}, queue="work")

    def completions() -> float:
        m = scrape(httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=10).text)
        return m.get("taskqueue_completions_total", {}).get((("queue", "work"),), 0.0)

    assert wait_for(lambda: completions() == 1, timeout=60), workers.stderr(proc)
    assert tq.get(task_id).state == "done"


def test_a_worker_that_does_not_lead_maintenance_leaves_the_queue_gauges_to_the_leader(tq: TaskQueue) -> None:
    from prometheus_client import generate_latest

    tq.enqueue({}, queue="job")
    worker = Worker(queues=["job"], capacity=3, name="follower", maintenance=False)
    metrics = WorkerMetrics(worker, tq, cache_seconds=0.0)
    m = scrape(generate_latest(metrics.registry).decode())
    assert "taskqueue_tasks" not in m and "taskqueue_oldest_waiting_seconds" not in m
    assert "taskqueue_metrics_collect_seconds" in m
    assert "taskqueue_summary_read_seconds" not in m  # nothing was read from the database
