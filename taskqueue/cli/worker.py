"""``worker MODULE:ATTR``: load a ``Worker`` from the user's code and run it.

The module is imported with the current directory on ``sys.path`` (as
``python -m`` would), the flags override the Worker's own settings through
``Worker.configure``, and the worker's structured log goes to stderr.
"""

from __future__ import annotations

import datetime as dt
import importlib
import json
import logging
import os
import sys
from typing import Annotated, Any

import typer

from .common import RUN, CliError, DsnOption, SchemaOption, open_queue

#: Attributes every LogRecord has; anything else was passed as ``extra=`` and is a field.
_RECORD_KEYS = frozenset(vars(logging.LogRecord("", 0, "", 0, "", (), None))) | {"message", "asctime", "taskName"}


class FieldsFormatter(logging.Formatter):
    """One line per record: time, level, logger, message, then the record's extra fields.

    A record with an exception (a handler that raised) is followed by its whole
    traceback. ``json=True`` prints one JSON object per line for log shippers,
    the traceback in its ``exception`` field.
    """

    def __init__(self, as_json: bool = False) -> None:
        super().__init__()
        self.as_json = as_json

    def format(self, record: logging.LogRecord) -> str:
        # Called once per task outcome at INFO: kept lean (no vars() copy, one pass over the fields).
        fields = {k: v for k, v in record.__dict__.items() if k not in _RECORD_KEYS and k[:1] != "_"}
        when = dt.datetime.fromtimestamp(record.created, dt.timezone.utc).isoformat(timespec="milliseconds")
        message = record.getMessage()
        trace = self.formatException(record.exc_info) if record.exc_info else ""
        if self.as_json:
            doc = {"time": when, "level": record.levelname, "logger": record.name, "message": message, **fields}
            if trace:
                doc["exception"] = trace
            return json.dumps(doc, default=str, ensure_ascii=False)
        extras = " ".join(f"{k}={_compact(v)}" for k, v in fields.items())
        line = f"{when} {record.levelname:<7} {record.name}: {message}" + (f"  {extras}" if extras else "")
        return f"{line}\n{trace}" if trace else line


def _compact(value: Any) -> str:
    if type(value) is int or type(value) is float:
        return str(value)
    if isinstance(value, (list, tuple)):
        return ",".join(map(str, value))
    text = str(value)
    return json.dumps(text) if (" " in text or not text) else text


def setup_logging(level: str, as_json: bool) -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(FieldsFormatter(as_json))
    root = logging.getLogger("taskqueue")
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    root.propagate = False


def load_worker(target: str) -> Any:
    """Import ``module:attr`` (attr may be dotted) and check that it is a Worker."""
    from ..worker import Worker

    module_name, sep, attr = target.partition(":")
    if not sep or not module_name or not attr:
        raise CliError(f"worker target must look like MODULE:ATTR, got {target!r}", 2)
    if os.getcwd() not in sys.path and "" not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        obj: Any = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name and module_name.startswith(exc.name):
            raise CliError(f"cannot import {module_name!r}: no module named {exc.name!r}", 2) from None
        raise CliError(f"importing {module_name!r} failed: {exc}") from None
    except Exception as exc:
        raise CliError(f"importing {module_name!r} failed: {type(exc).__name__}: {exc}") from None
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise CliError(f"{module_name!r} has no attribute {attr!r}", 2) from None
    if not isinstance(obj, Worker):
        raise CliError(f"{target} is a {type(obj).__name__}, not a taskqueue.Worker", 2)
    return obj


def _queues(value: str | None) -> list[str] | None:
    if value is None:
        return None
    names = [q.strip() for q in value.split(",") if q.strip()]
    if not names:
        raise CliError("--queues needs at least one queue name", 2)
    return names


def worker(
    ctx: typer.Context,
    target: Annotated[
        str, typer.Argument(metavar="MODULE:ATTR", help="Where your Worker lives, e.g. myapp.tasks:worker.")
    ],
    queues: Annotated[
        str | None, typer.Option("--queues", help="Comma-separated queues (default: the Worker's).")
    ] = None,
    capacity: Annotated[int | None, typer.Option("--capacity", min=0, help="Resource budget of running tasks.")] = None,
    concurrency: Annotated[int | None, typer.Option("--concurrency", min=1, help="Handler threads.")] = None,
    async_concurrency: Annotated[
        int | None,
        typer.Option("--async-concurrency", min=1, max=100_000, help="async def handlers at once (default 100)."),
    ] = None,
    claim_ahead: Annotated[
        int | None,
        typer.Option("--claim-ahead", min=0, max=100_000,
                     help="Most claims held beyond the handler threads (default 100; more drains cheap handlers "
                          "faster, a busy worker starts urgent tasks later)."),
    ] = None,
    inline: Annotated[
        bool,
        typer.Option("--inline",
                     help="Run handlers on the claim loop's thread: sync ones one at a time, async ones a group "
                          "at a time on its event loop (CPU-bound handlers: one worker process per core)."),
    ] = False,
    lease: Annotated[float | None, typer.Option("--lease", help="Lease seconds; heartbeats renew it.")] = None,
    grace: Annotated[
        float | None, typer.Option("--grace", min=0, help="Seconds running tasks get on shutdown.")
    ] = None,
    policy: Annotated[
        str | None, typer.Option("--policy", help="Scheduling policy: greedy, strict or backfill (default backfill).")
    ] = None,
    log_level: Annotated[str, typer.Option("--log-level", help="DEBUG, INFO, WARNING or ERROR.")] = "INFO",
    log_json: Annotated[bool, typer.Option("--log-json", help="Log one JSON object per line.")] = False,
    no_migrate: Annotated[bool, typer.Option("--no-migrate", help="Do not bring the schema up to date first.")] = False,
    metrics_port: Annotated[
        int | None, typer.Option("--metrics-port", min=0, max=65535, help="Serve Prometheus /metrics on this port.")
    ] = None,
    metrics_host: Annotated[str, typer.Option("--metrics-host", help="Address for --metrics-port.")] = "127.0.0.1",
    dsn: DsnOption = None,
    schema: SchemaOption = None,
) -> None:
    """Run a Worker until SIGTERM or SIGINT (a second signal stops at once)."""
    if log_level.upper() not in ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"):
        raise CliError(f"--log-level must be DEBUG, INFO, WARNING or ERROR, got {log_level!r}", 2)
    the_worker = load_worker(target)
    the_worker.configure(
        queues=_queues(queues), capacity=capacity, concurrency=concurrency, lease=lease, grace=grace, policy=policy,
        async_concurrency=async_concurrency, claim_ahead=claim_ahead, inline=True if inline else None,
    )
    setup_logging(log_level, log_json)
    with open_queue(ctx, dsn, schema) as tq:
        if not no_migrate:
            tq.migrate()
        metrics = _start_metrics(the_worker, tq, metrics_port, metrics_host) if metrics_port is not None else None
        try:
            the_worker.run(tq)
        finally:
            if metrics is not None:
                metrics.stop()


def _start_metrics(the_worker: Any, tq: Any, port: int, host: str) -> Any:
    try:
        from ..metrics import WorkerMetrics
    except ImportError as exc:
        raise CliError(f"--metrics-port needs prometheus-client: pip install 'taskqueue[dashboard]' ({exc})") from None
    metrics = WorkerMetrics(the_worker, tq)
    bound = metrics.start(port, host)
    logging.getLogger("taskqueue.metrics").info("metrics on http://%s:%d/metrics", host, bound)
    return metrics


def register(app: typer.Typer) -> None:
    app.command("worker", rich_help_panel=RUN)(worker)
