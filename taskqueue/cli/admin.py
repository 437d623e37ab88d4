"""Operator actions: ``migrate``, ``rescue``, ``cancel ID``, ``retry ID``."""

from __future__ import annotations

from typing import Annotated

import typer

from .common import CliError, DsnOption, SchemaOption, existing_task, open_queue


def migrate(ctx: typer.Context, dsn: DsnOption = None, schema: SchemaOption = None) -> None:
    """Create or upgrade the queue schema (safe to run from many places at once)."""
    with open_queue(ctx, dsn, schema) as tq:
        tq.migrate()
        typer.echo(f"schema {tq.schema} is up to date")


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
    app.command("migrate")(migrate)
    app.command("rescue")(rescue)
    app.command("cancel")(cancel)
    app.command("retry")(retry)
