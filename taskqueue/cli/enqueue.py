"""``enqueue``: one task from the command line, or a JSON-lines file in bulk.

The bulk loader checks every line before it writes anything, reports every bad
line by number, and then inserts in batches inside ONE transaction, so a file
is loaded whole or not at all.
"""

from __future__ import annotations

import datetime as dt
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Annotated, Any, cast

import typer
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
)

from ..errors import ValidationError
from ..spec import build_spec, build_spec_from_mapping
from ..task import EnqueueSpec
from .common import CliError, DsnOption, SchemaOption, err, open_queue

#: Rows per enqueue_many call inside the one transaction.
BATCH_SIZE = 5000
#: Bad lines described one by one; the summary line still lists every number.
MAX_DESCRIBED = 50


def enqueue(
    ctx: typer.Context,
    payload: Annotated[str | None, typer.Argument(metavar="PAYLOAD_JSON", help="The task's payload, as JSON.")] = None,
    queue: Annotated[str | None, typer.Option("--queue", "-q", help="Queue name [default: default].")] = None,
    priority: Annotated[int | None, typer.Option("--priority", "-p", help="Lower runs first [default: 0].")] = None,
    required: Annotated[
        int | None, typer.Option("--required", "-r", help="Resource units the task needs, >= 0 [default: 0].")
    ] = None,
    pool: Annotated[str | None, typer.Option("--pool", help="Concurrency pool, e.g. a /24 network.")] = None,
    delay: Annotated[float | None, typer.Option("--delay", help="Seconds before the task may run.")] = None,
    max_attempts: Annotated[
        int | None, typer.Option("--max-attempts", help="Attempts before it fails for good [default: 3].")
    ] = None,
    estimate: Annotated[
        float | None, typer.Option("--estimate", help="Expected run time in seconds, for the scheduling policies.")
    ] = None,
    dedupe_key: Annotated[
        str | None, typer.Option("--dedupe-key", help="At most one active task per key; returns the holder's id.")
    ] = None,
    file: Annotated[
        str | None,
        typer.Option("--file", "-f", metavar="F.jsonl", help="Bulk load: one JSON object per line ('-' for stdin)."),
    ] = None,
    batch_size: Annotated[int, typer.Option("--batch-size", min=1, help="Rows per insert batch.")] = BATCH_SIZE,
    dsn: DsnOption = None,
    schema: SchemaOption = None,
) -> None:
    """Add a task and print its id (the last word on stdout), or bulk-load --file.

    With --file, the other options are defaults for the keys a line leaves out.
    """
    given = {
        "queue": queue,
        "priority": priority,
        "required": required,
        "pool": pool,
        "delay": delay,
        "max_attempts": max_attempts,
        "dedupe_key": dedupe_key,
        "estimate": estimate,
    }
    options: dict[str, Any] = {k: v for k, v in given.items() if v is not None}
    if file is not None:
        if payload is not None:
            raise CliError("give PAYLOAD_JSON or --file, not both", 2)
        if "dedupe_key" in options:
            raise CliError("--dedupe-key applies to one task; put dedupe_key in each line instead", 2)
        _enqueue_file(ctx, file, batch_size, options, dsn, schema)
        return
    if payload is None:
        raise CliError("missing PAYLOAD_JSON (or --file F.jsonl)", 2)
    try:
        value = json.loads(payload)
    except json.JSONDecodeError as exc:
        raise CliError(f"PAYLOAD_JSON is not valid JSON: {exc}", 2) from None
    # Validate before touching the database, so bad input never waits on a connection.
    build_spec(value, **options)
    with open_queue(ctx, dsn, schema) as tq:
        task_id = tq.enqueue(value, **options)
    typer.echo(f"enqueued task {task_id}")


def _open(path: str) -> IO[str]:
    if path == "-":
        return sys.stdin
    p = Path(path)
    if not p.is_file():
        raise CliError(f"{path}: no such file", 2)
    return p.open(encoding="utf-8")


def _lines(handle: IO[str]) -> Iterator[tuple[int, str]]:
    for number, line in enumerate(handle, start=1):
        if line.strip():
            yield number, line


def parse_line(line: str, defaults: dict[str, Any] | None = None) -> EnqueueSpec:
    """One JSON-lines entry as enqueue_many's mapping; ``run_at`` may be an ISO 8601 string."""
    try:
        value = json.loads(line)
    except json.JSONDecodeError as exc:
        raise ValidationError("json", str(exc)) from None
    if not isinstance(value, dict):
        raise ValidationError("json", f"must be an object with a 'payload' key, got {type(value).__name__}")
    run_at = value.get("run_at")
    if isinstance(run_at, str):
        try:
            value["run_at"] = dt.datetime.fromisoformat(run_at.replace("Z", "+00:00"))
        except ValueError:
            raise ValidationError("run_at", f"{run_at!r} is not an ISO 8601 timestamp") from None
    for key, default in (defaults or {}).items():
        if key == "delay" and "run_at" in value:
            continue
        value.setdefault(key, default)
    build_spec_from_mapping(value, 0)
    return cast(EnqueueSpec, value)  # checked just above


def _describe(exc: ValidationError) -> str:
    text = str(exc)
    for prefix in ("specs[0].", "specs[0]: ", "specs[0]"):
        if text.startswith(prefix):
            return text[len(prefix) :]
    return text


def _enqueue_file(
    ctx: typer.Context,
    path: str,
    batch_size: int,
    defaults: dict[str, Any],
    dsn: str | None,
    schema: str | None,
) -> None:
    entries: list[EnqueueSpec] = []
    bad: list[int] = []
    handle = _open(path)
    try:
        for number, line in _lines(handle):
            try:
                entries.append(parse_line(line, defaults))
            except ValidationError as exc:
                bad.append(number)
                if len(bad) <= MAX_DESCRIBED:
                    err.print(f"error: line {number}: {_describe(exc)}", markup=False)
    except UnicodeDecodeError as exc:
        raise CliError(f"{path}: not UTF-8 text ({exc.reason})") from None
    finally:
        if handle is not sys.stdin:
            handle.close()
    if bad:
        plural = "line" if len(bad) == 1 else "lines"
        raise CliError(f"{len(bad)} bad {plural} in {path} ({', '.join(map(str, bad))}); nothing was written", 1)
    if not entries:
        raise CliError(f"{path}: no tasks in the file", 1)
    with open_queue(ctx, dsn, schema) as tq:
        progress = Progress(
            TextColumn("enqueue"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=err,
            transient=not err.is_terminal,
            disable=not err.is_terminal,
        )
        with progress, tq.engine.begin() as conn:
            bar = progress.add_task("enqueue", total=len(entries))
            for start in range(0, len(entries), batch_size):
                batch = entries[start : start + batch_size]
                tq.enqueue_many(batch, connection=conn)
                progress.advance(bar, len(batch))
    typer.echo(f"enqueued {len(entries)} tasks from {path}")


def register(app: typer.Typer) -> None:
    app.command("enqueue")(enqueue)
