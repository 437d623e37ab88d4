"""The ``taskqueue`` command: the typer app, and errors turned into one line on stderr.

Typer's boxed panels and click's multi-line usage errors are off: operators
pipe this command into scripts, so every failure is ``error: ...`` on one
line with exit status 2 (usage) or 1 (anything else), never a traceback.
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Sequence
from typing import Any

import typer

from ..errors import TaskQueueError, ValidationError
from . import admin, check, dashboard, demo, enqueue, inspect, pools, simulate, worker
from .common import CliError, Connection, DsnOption, SchemaOption


def _click_exceptions() -> Any:
    """typer >= 0.16 vendors click, and its exceptions are the ones raised; older typer uses click itself."""
    try:
        return importlib.import_module("typer._click.exceptions")
    except ImportError:  # pragma: no cover - older typer
        return importlib.import_module("click.exceptions")


click_exceptions = _click_exceptions()

app = typer.Typer(
    name="taskqueue",
    help="A durable task queue in PostgreSQL: enqueue, run workers, inspect, and a live demo.",
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    context_settings={"help_option_names": ["-h", "--help"]},
)


@app.callback()
def root(ctx: typer.Context, dsn: DsnOption = None, schema: SchemaOption = None) -> None:
    """A durable task queue in PostgreSQL: enqueue, run workers, inspect, and a live demo."""
    ctx.obj = Connection(dsn=dsn, schema=schema)


admin.register(app)
enqueue.register(app)
inspect.register(app)
pools.register(app)
check.register(app)
worker.register(app)
demo.register(app)
dashboard.register(app)
simulate.register(app)


def _first_line(text: str) -> str:
    lines = [line.strip() for line in str(text).strip().splitlines() if line.strip()]
    return lines[0] if lines else ""


def describe(exc: BaseException) -> tuple[str, int]:
    """The one-line message and exit status for an exception that reached the top."""
    if isinstance(exc, click_exceptions.UsageError):
        return _first_line(exc.format_message()), 2
    if isinstance(exc, click_exceptions.ClickException):
        return _first_line(exc.format_message()), exc.exit_code or 1
    if isinstance(exc, CliError):
        return str(exc), exc.code
    if isinstance(exc, ValidationError):
        return str(exc), 2
    if isinstance(exc, TaskQueueError):  # DatabaseError included: its message is already one line
        return _first_line(str(exc)), 1
    if isinstance(exc, OSError):
        return _first_line(str(exc)) or type(exc).__name__, 1
    return f"{type(exc).__name__}: {_first_line(str(exc))}", 1


def main(argv: Sequence[str] | None = None) -> None:
    """Entry point of ``taskqueue`` and ``python -m taskqueue``; always ends in SystemExit."""
    command = typer.main.get_command(app)
    args = list(sys.argv[1:] if argv is None else argv)
    try:
        rv = command.main(args=args, prog_name="taskqueue", standalone_mode=False)
    except click_exceptions.NoArgsIsHelpError as exc:
        typer.echo(exc.ctx.get_help() if exc.ctx is not None else "usage: taskqueue COMMAND", err=False)
        raise SystemExit(0) from None
    except typer.Abort:
        typer.echo("error: interrupted", err=True)
        raise SystemExit(130) from None
    except KeyboardInterrupt:
        typer.echo("error: interrupted", err=True)
        raise SystemExit(130) from None
    except BrokenPipeError:
        raise SystemExit(1) from None
    except Exception as exc:
        if os.environ.get("TASKQUEUE_DEBUG"):
            raise
        message, code = describe(exc)
        typer.echo(f"error: {message}", err=True)
        raise SystemExit(code) from None
    raise SystemExit(rv if isinstance(rv, int) else 0)
