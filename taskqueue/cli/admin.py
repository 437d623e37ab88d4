"""Operator actions: ``migrate``, ``rescue``, ``cancel ID``, ``retry ID``."""

from __future__ import annotations

from typing import Annotated

import typer

from .common import ADMIN, CliError, DsnOption, SchemaOption, existing_task, open_queue


def migrate(ctx: typer.Context, dsn: DsnOption = None, schema: SchemaOption = None) -> None:
    """Create or upgrade the queue schema (safe to run from many places at once); say which revision it is at."""
    from ..migrate import current_revision

    with open_queue(ctx, dsn, schema) as tq:
        before = current_revision(tq.engine, tq.schema)
        tq.migrate()
        after = current_revision(tq.engine, tq.schema)
    if before is None:
        typer.echo(f"schema {tq.schema} created at revision {after} (the newest)")
    elif before != after:
        typer.echo(f"schema {tq.schema} upgraded from revision {before} to {after} (the newest)")
    else:
        typer.echo(f"schema {tq.schema} was already at revision {after} (the newest); nothing to do")


def rescue(ctx: typer.Context, dsn: DsnOption = None, schema: SchemaOption = None) -> None:
    """Requeue (or fail, when out of attempts) every running task whose lease expired."""
    with open_queue(ctx, dsn, schema) as tq:
        typer.echo(f"rescued {tq.rescue_expired()}")


def cancel(
    ctx: typer.Context,
    task_id: Annotated[int, typer.Argument(metavar="ID", min=1, help="The task's id.")],
    dsn: DsnOption = None,
    schema: SchemaOption = None,
) -> None:
    """Cancel a waiting task, or ask the worker running it to stop."""
    with open_queue(ctx, dsn, schema) as tq:
        before = existing_task(tq, task_id)
        if not tq.cancel(task_id):
            raise CliError(f"task {task_id} is already {before.state}; nothing to cancel")
        after = tq.get(task_id)
        if after is not None and after.state == "running":
            typer.echo(f"cancellation requested for running task {task_id}")
        else:
            typer.echo(f"cancelled task {task_id}")


def retry(
    ctx: typer.Context,
    task_id: Annotated[int, typer.Argument(metavar="ID", min=1, help="The failed task's id.")],
    dsn: DsnOption = None,
    schema: SchemaOption = None,
) -> None:
    """Run a failed task again with a fresh attempt budget."""
    with open_queue(ctx, dsn, schema) as tq:
        before = existing_task(tq, task_id)
        if not tq.retry(task_id):
            raise CliError(f"task {task_id} is {before.state}; only a failed task can be retried")
        typer.echo(f"task {task_id} is queued again with {before.max_attempts} attempts")


def register(app: typer.Typer) -> None:
    app.command("migrate", rich_help_panel=ADMIN)(migrate)
    app.command("rescue", rich_help_panel=ADMIN)(rescue)
    app.command("cancel", rich_help_panel=ADMIN)(cancel)
    app.command("retry", rich_help_panel=ADMIN)(retry)
