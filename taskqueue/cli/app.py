"""The ``taskqueue`` command: the typer app, its grouped help, and errors turned into one line on stderr.

Typer's boxed panels and click's multi-line usage errors are off: operators
pipe this command into scripts, so every failure is ``error: ...`` on one
line with exit status 2 (usage) or 1 (anything else), never a traceback.

Adding a command: write ``taskqueue/cli/<name>.py`` with a ``register(app)``
that passes ``rich_help_panel=RUN, INSPECT or ADMIN`` (the section of
``taskqueue --help``), and call it below. Every command module is imported on
each start, so import SQLAlchemy, psycopg, alembic and the queue inside the
command function, not at the top of the module (``open_queue`` already does);
``tests/test_cli_startup.py`` fails when a module forgets.
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Sequence
from typing import Any

import typer
from typer.core import TyperGroup

from ..errors import TaskQueueError, ValidationError
from . import admin, check, dashboard, demo, embedded, enqueue, inspect, interrupts, pool_of, pools, simulate, worker
from .common import ADMIN, INSPECT, RUN, CliError, Connection, DsnOption, SchemaOption


def _click_exceptions() -> Any:
    """typer >= 0.16 vendors click, and its exceptions are the ones raised; older typer uses click itself."""
    try:
        return importlib.import_module("typer._click.exceptions")
    except ImportError:  # pragma: no cover - older typer
        return importlib.import_module("click.exceptions")


click_exceptions = _click_exceptions()

SECTIONS = (RUN, INSPECT, ADMIN)


class GroupedCommands(TyperGroup):
    """``--help`` lists the commands by section (run, inspect, admin), A to Z, each with its whole first paragraph."""

    def format_commands(self, ctx: Any, formatter: Any) -> None:
        sections: dict[str, list[tuple[str, str]]] = {}
        for name, command in sorted(self.commands.items()):
            if command.hidden:
                continue
            section = getattr(command, "rich_help_panel", None) or "other"
            sections.setdefault(section, []).append((name, _summary(command)))
        order = [s for s in SECTIONS if s in sections] + [s for s in sections if s not in SECTIONS]
        for section in order:
            with formatter.section(f"Commands ({section})"):
                formatter.write_dl(sections[section])


def _summary(command: Any) -> str:
    """The first paragraph of a command's help, on one line (click would cut it at 45 characters)."""
    text = command.short_help or command.help or ""
    paragraph = text.strip().split("\n\n", 1)[0]
    return " ".join(paragraph.split())


app = typer.Typer(
    name="taskqueue",
    cls=GroupedCommands,
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


enqueue.register(app)
pool_of.register(app)
worker.register(app)
demo.register(app)
inspect.register(app)
check.register(app)
pools.register(app)
admin.register(app)
embedded.register(app)
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
        return _first_line(str(exc)), 2
    if isinstance(exc, TaskQueueError):  # DatabaseError included: its message is already one line
        return _first_line(str(exc)), 1
    if isinstance(exc, OSError):
        return _first_line(str(exc)) or type(exc).__name__, 1
    return f"{type(exc).__name__}: {_first_line(str(exc))}", 1


def main(argv: Sequence[str] | None = None) -> None:
    """Run the command line ``argv``; always ends in SystemExit (``taskqueue.cli.main`` adds the Ctrl-C policy)."""
    try:
        code = _run(argv)
    except KeyboardInterrupt:  # raised while an error was being reported
        code = _interrupted()
    interrupts.finished()
    raise SystemExit(code)


def _run(argv: Sequence[str] | None) -> int:
    command = typer.main.get_command(app)
    args = list(sys.argv[1:] if argv is None else argv)
    try:
        rv = command.main(args=args, prog_name="taskqueue", standalone_mode=False)
    except click_exceptions.NoArgsIsHelpError as exc:
        typer.echo(exc.ctx.get_help() if exc.ctx is not None else "usage: taskqueue COMMAND", err=False)
        return 0
    except (typer.Abort, KeyboardInterrupt):
        return _interrupted()
    except BrokenPipeError:
        return 1
    except Exception as exc:
        if os.environ.get("TASKQUEUE_DEBUG"):
            raise
        message, code = describe(exc)
        typer.echo(f"error: {message}", err=True)
        return code
    return rv if isinstance(rv, int) else 0


def _interrupted() -> int:
    interrupts.told()
    typer.echo("error: interrupted", err=True)
    return interrupts.INTERRUPTED
