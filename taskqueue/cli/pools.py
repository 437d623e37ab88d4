"""``pools [--json]``, ``pools set NAME LIMIT``, ``pools unset NAME``."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.table import Table

from .common import DsnOption, JsonOption, SchemaOption, group_app, open_queue, out, print_json

pools_app = group_app("Pool limits and their use; `pools set NAME LIMIT`, `pools unset NAME`.")


@pools_app.callback()
def pools(
    ctx: typer.Context,
    as_json: JsonOption = False,
    dsn: DsnOption = None,
    schema: SchemaOption = None,
) -> None:
    """List every pool with its running count and limit."""
    if ctx.invoked_subcommand is not None:
        return
    with open_queue(ctx, dsn, schema) as tq:
        found = tq.pools()
    if as_json:
        print_json([{"name": p.name, "limit": p.limit, "running": p.running} for p in found])
        return
    table = Table(title="pools")
    table.add_column("pool")
    table.add_column("running", justify="right")
    table.add_column("limit", justify="right")
    for p in found:
        table.add_row(p.name, str(p.running), "-" if p.limit is None else str(p.limit))
    out.print(table)


@pools_app.command("set")
def set_limit(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(metavar="NAME", help="Pool name, e.g. 10.1.2.0/24.")],
    limit: Annotated[int, typer.Argument(metavar="LIMIT", min=0, help="Most tasks running at once (>= 0).")],
    dsn: DsnOption = None,
    schema: SchemaOption = None,
) -> None:
    """Cap the pool at LIMIT running tasks (lowering never stops running tasks)."""
    with open_queue(ctx, dsn, schema) as tq:
        tq.set_pool_limit(name, limit)
    typer.echo(f"pool {name}: limit {limit}")


@pools_app.command("unset")
def unset_limit(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(metavar="NAME", help="Pool name.")],
    dsn: DsnOption = None,
    schema: SchemaOption = None,
) -> None:
    """Remove the pool's limit."""
    with open_queue(ctx, dsn, schema) as tq:
        tq.set_pool_limit(name, None)
    typer.echo(f"pool {name}: no limit")


def register(app: typer.Typer) -> None:
    app.add_typer(pools_app, name="pools")
