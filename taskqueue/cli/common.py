"""What every command shares: the connection options, the queue handle, output helpers.

``--dsn`` and ``--schema`` are accepted both before the command
(``taskqueue --dsn X stats``) and after it (``taskqueue stats --dsn X``); the
one after the command wins.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import json
import os
from collections.abc import Iterator
from pathlib import PurePath
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console

from .. import humanize
from ..errors import TaskQueueError
from ..schema import SCHEMA_DEFAULT

if TYPE_CHECKING:  # imported in open_queue: SQLAlchemy and psycopg would slow every start
    from ..queue import TaskQueue

#: The sections of ``taskqueue --help`` (a command's ``rich_help_panel``).
RUN = "run"
INSPECT = "inspect"
ADMIN = "admin"

#: Width of tables written to a file or a pipe (rich would use 80 and wrap them); $COLUMNS wins.
CAPTURED_WIDTH = 160


def _console(**settings: Any) -> Console:
    console = Console(highlight=False, soft_wrap=True, **settings)
    if not console.is_terminal and not os.environ.get("COLUMNS"):
        console.width = CAPTURED_WIDTH
    return console


#: Tables and human output; scripts read --json from stdout.
out = _console()
#: Progress bars and live views go to stderr so stdout stays parseable.
err = _console(stderr=True)

DsnOption = Annotated[
    str | None,
    typer.Option(
        "--dsn",
        envvar="TASKQUEUE_DSN",
        show_envvar=True,
        help="PostgreSQL URI or SQLAlchemy URL; default: the embedded server.",
    ),
]
SchemaOption = Annotated[
    str | None,
    typer.Option("--schema", envvar="TASKQUEUE_SCHEMA", help=f"Queue schema (default {SCHEMA_DEFAULT})."),
]
JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON for scripts.")]


@dataclasses.dataclass
class Connection:
    """The connection settings given before the command name."""

    dsn: str | None = None
    schema: str | None = None


class CliError(TaskQueueError):
    """A one-line error for the user; ``code`` is the exit status."""

    def __init__(self, message: str, code: int = 1) -> None:
        super().__init__(message)
        self.code = code


def group_app(help: str) -> typer.Typer:
    """A command group that also runs on its own (``pools``, ``tasks``), with the one-line error style."""
    return typer.Typer(
        help=help,
        invoke_without_command=True,
        no_args_is_help=False,
        pretty_exceptions_enable=False,
        rich_markup_mode=None,
    )


def settings(ctx: typer.Context | None, dsn: str | None, schema: str | None) -> tuple[str | None, str]:
    """The command's own options, else the ones given before the command, else defaults."""
    root = ctx.find_root().obj if ctx is not None else None
    base = root if isinstance(root, Connection) else Connection()
    return dsn or base.dsn, schema or base.schema or SCHEMA_DEFAULT


@contextlib.contextmanager
def open_queue(ctx: typer.Context | None, dsn: str | None, schema: str | None) -> Iterator[TaskQueue]:
    from ..queue import TaskQueue

    resolved_dsn, resolved_schema = settings(ctx, dsn, schema)
    tq = TaskQueue(resolved_dsn, schema=resolved_schema)
    try:
        yield tq
    finally:
        tq.close()


def jsonable(value: Any) -> Any:
    if isinstance(value, (dt.datetime, dt.date)):
        return value.isoformat()
    if isinstance(value, dt.timedelta):
        return value.total_seconds()
    if isinstance(value, PurePath):
        return str(value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    return value


def print_json(value: Any) -> None:
    typer.echo(json.dumps(jsonable(value), indent=2, sort_keys=True, ensure_ascii=False))


def task_dict(task: Any) -> dict[str, Any]:
    """A task for JSON output; the lease token is a secret of its holder and stays out."""
    data: dict[str, Any] = jsonable(task)
    data.pop("lease_token", None)
    return data


def fmt_seconds(seconds: float | None) -> str:
    return humanize.seconds(seconds)


def existing_task(tq: TaskQueue, task_id: int) -> Any:
    """The task, or a one-line error when there is none."""
    task = tq.get(task_id)
    if task is None:
        raise CliError(f"no task {task_id}")
    return task


def fmt_time(value: dt.datetime | None) -> str:
    return "-" if value is None else value.isoformat(sep=" ", timespec="milliseconds")
