"""Prometheus metrics: queue-wide gauges read from the database, and a process's own event counts.

Two sources, one exposition:

* queue-wide gauges (depth, oldest waiting age, pools, workers) come from a
  :class:`taskqueue.insights.CachedSummary`, read at most once per cache
  interval through the partial indexes (see ``sql/dashboard.sql``);
* counters and the claim-latency histogram come from the
  :class:`taskqueue.counters.Counters` of the ``TaskQueue`` handle(s) this
  process uses, so each worker reports what it did, and Prometheus sums.

Needs ``prometheus-client`` (the ``dashboard`` extra).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator
from typing import Any

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

from .counters import LATENCY_BUCKETS, Counters
from .insights import Summary, WorkerLoad, priority_band

PREFIX = "taskqueue"

#: Help text per counter event; the family is taskqueue_<event>_total.
COUNTER_HELP = {
    "claims": "Tasks claimed by this process.",
    "completions": "Claims this process finished as done (or cancelled on request).",
    "failures": "Claims this process finished with an error (retried or not).",
    "retries": "Failed tasks put back to run again: by backoff after a failed attempt, or by an operator.",
    "rescues": "Expired leases this process rescued (requeued or failed).",
    "lost_leases": "Heartbeats, completions and failures refused because the claim was no longer current.",
    "lock_retries": "State changes run again after PostgreSQL rolled them back to break a deadlock.",
}


class QueueCollector(Collector):
    """Yields the metric families on each scrape; any source may be absent.

    ``summary`` gives the queue-wide gauges (None: this process does not
    report them), ``counters`` the event counts of this process, and
    ``local_workers`` the capacity of workers running in this process
    (which overrides what the summary knows of them).
    """

    def __init__(
        self,
        *,
        summary: Callable[[], Summary | None] | None = None,
        counters: Counters | None = None,
        local_workers: Callable[[], list[WorkerLoad]] | None = None,
    ) -> None:
        self.summary = summary
        self.counters = counters
        self.local_workers = local_workers

    def describe(self) -> list[Metric]:
        return []  # collected on demand: never read the database at registration

    def collect(self) -> Iterator[Metric]:
        started = time.perf_counter()
        summary = self.summary() if self.summary is not None else None
        workers: dict[str, WorkerLoad] = {}
        if summary is not None:
            yield from _queue_gauges(summary)
            workers.update((w.name, w) for w in summary.workers)
        if self.local_workers is not None:
            workers.update((w.name, w) for w in self.local_workers())
        if summary is not None or self.local_workers is not None:
            yield from _worker_gauges(list(workers.values()))
        if self.counters is not None:
            yield from _counter_families(self.counters)
        took = GaugeMetricFamily(
            f"{PREFIX}_metrics_collect_seconds", "Time this scrape spent collecting the taskqueue families."
        )
        took.add_metric([], time.perf_counter() - started)
        yield took


def _queue_gauges(summary: Summary) -> Iterator[Metric]:
    depth = GaugeMetricFamily(
        f"{PREFIX}_tasks",
        "Live tasks and failed tasks by queue, state and priority band (a due scheduled task counts as queued).",
        labels=["queue", "state", "priority_band"],
    )
    bands: dict[tuple[str, str, str], int] = {}
    for g in summary.groups:
        key = (g.queue, g.state, priority_band(g.priority))
        bands[key] = bands.get(key, 0) + g.count
    for key, n in sorted(bands.items()):
        depth.add_metric(list(key), n)
    yield depth
    oldest = GaugeMetricFamily(
        f"{PREFIX}_oldest_waiting_seconds",
        "Per queue: how long its longest-waiting queued task has been due (0 when nothing waits).",
        labels=["queue"],
    )
    for queue, seconds in sorted(summary.oldest_waiting_seconds().items()):
        oldest.add_metric([queue], seconds)
    yield oldest
    running = GaugeMetricFamily(f"{PREFIX}_pool_running", "Running tasks per pool.", labels=["pool"])
    limit = GaugeMetricFamily(f"{PREFIX}_pool_limit", "Running limit per pool (pools without a limit are left out).",
                              labels=["pool"])
    parked = GaugeMetricFamily(f"{PREFIX}_pool_parked", "Queued tasks parked because their pool is full.",
                               labels=["pool"])
    for pool in summary.pool_use():
        running.add_metric([pool["name"]], pool["running"])
        parked.add_metric([pool["name"]], pool["parked"])
        if pool["limit"] is not None:
            limit.add_metric([pool["name"]], pool["limit"])
    yield from (running, limit, parked)
    finished = GaugeMetricFamily(f"{PREFIX}_finished_last_hour", "Tasks that reached a final state in the last hour.")
    finished.add_metric([], sum(summary.finished_per_minute))
    yield finished
    read = GaugeMetricFamily(f"{PREFIX}_summary_read_seconds",
                             "Time the database took for the latest queue summary (read once per cache interval).")
    read.add_metric([], summary.seconds)
    yield read


def _worker_gauges(workers: list[WorkerLoad]) -> Iterator[Metric]:
    capacity = GaugeMetricFamily(f"{PREFIX}_worker_capacity",
                                 "Resource budget per live worker (workers with unlimited capacity are left out).",
                                 labels=["worker"])
    in_use = GaugeMetricFamily(f"{PREFIX}_worker_capacity_in_use",
                               "Resources taken by each worker's running tasks.", labels=["worker"])
    tasks = GaugeMetricFamily(f"{PREFIX}_worker_running_tasks", "Tasks each worker is running.", labels=["worker"])
    for w in sorted(workers, key=lambda w: w.name):
        if w.capacity is not None:
            capacity.add_metric([w.name], w.capacity)
        in_use.add_metric([w.name], w.in_use)
        tasks.add_metric([w.name], w.tasks)
    yield from (capacity, in_use, tasks)


def _counter_families(counters: Counters) -> Iterator[Metric]:
    snap = counters.snapshot()
    for event, help_text in COUNTER_HELP.items():
        if event in snap.by_process:
            family = CounterMetricFamily(f"{PREFIX}_{event}", help_text)
            family.add_metric([], snap.by_process[event])
        elif event == "retries":
            family = CounterMetricFamily(f"{PREFIX}_{event}", help_text, labels=["queue", "kind"])
            for (name, queue, kind), n in sorted(snap.by_queue.items()):
                if name == event:
                    family.add_metric([queue, kind], n)
        else:
            family = CounterMetricFamily(f"{PREFIX}_{event}", help_text, labels=["queue"])
            for (name, queue, _kind), n in sorted(snap.by_queue.items()):
                if name == event:
                    family.add_metric([queue], n)
        yield family
    latency = HistogramMetricFamily(
        f"{PREFIX}_claim_latency_seconds",
        "From when a task was due (run_at) to when this process claimed it, in database time.",
        labels=["queue"],
    )
    for queue, hist in sorted(snap.latency.items()):
        cumulative = 0
        buckets: list[tuple[str, float]] = []
        for bound, n in zip(LATENCY_BUCKETS, hist.buckets, strict=True):
            cumulative += n
            buckets.append(("+Inf" if math.isinf(bound) else repr(bound), cumulative))
        latency.add_metric([queue], buckets, hist.total)
    yield latency


def make_registry(**sources: Any) -> CollectorRegistry:
    """A registry of its own (never the global one), holding one QueueCollector."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(QueueCollector(**sources))
    return registry


def exposition(registry: CollectorRegistry) -> tuple[bytes, str]:
    """The text format and its content type, for an HTTP response."""
    return generate_latest(registry), CONTENT_TYPE_LATEST


class WorkerMetrics:
    """``/metrics`` of a worker process (``taskqueue worker --metrics-port N``).

    It always reports the process's counters and the worker's own capacity
    and use. The queue-wide gauges are reported by the one worker that leads
    maintenance at the time, read at most once per ``cache_seconds``: a fleet
    of workers costs one summary per interval, not one per worker.
    """

    def __init__(self, worker: Any, tq: Any, *, cache_seconds: float = 5.0) -> None:
        from .insights import CachedSummary, read_summary
        from .queue import default_worker_name

        self.worker = worker
        self.tq = tq
        self.name = worker.name or default_worker_name()
        self.cache = CachedSummary(lambda: read_summary(tq), cache_seconds)
        self.registry = make_registry(summary=self._summary, counters=tq.counters, local_workers=self._local)
        self._server: Any = None

    def _leads(self) -> bool:
        maintainer = getattr(self.worker, "maintainer", None)
        return maintainer is not None and maintainer.leader.is_leader

    def _summary(self) -> Summary | None:
        return self.cache.get() if self._leads() else None

    def _local(self) -> list[WorkerLoad]:
        capacity = getattr(self.worker, "capacity_state", None)
        if capacity is None:
            return []
        return [WorkerLoad(self.name, self.worker.capacity, capacity.in_use, capacity.busy())]

    def start(self, port: int, host: str = "127.0.0.1") -> int:
        """Serve on a daemon thread; returns the bound port (useful with port 0)."""
        from prometheus_client import start_http_server

        self._server, _thread = start_http_server(port, addr=host, registry=self.registry)
        return int(self._server.server_address[1])

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
