"""``embedded status|start|stop``: see and control the PostgreSQL used when no DSN is given."""

from __future__ import annotations

from typing import Annotated

import typer

from ..embedded import EmbeddedServer
from .common import ADMIN, JsonOption, print_json

DataDirOption = Annotated[
    str | None,
    typer.Option("--data-dir", metavar="DIR", help="Its data directory [default: $TASKQUEUE_HOME/pgdata]."),
]

embedded_app = typer.Typer(
    help="The embedded PostgreSQL used when no DSN is given: `embedded status`, `embedded start`, `embedded stop`.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)


@embedded_app.command("status")
def status(data_dir: DataDirOption = None, as_json: JsonOption = False) -> None:
    """Whether it runs, its pid, data directory, log file and connection URI; exit 3 when stopped."""
    found = EmbeddedServer(data_dir).status()
    if as_json:
        print_json(found)
    else:
        state = {
            "ready": f"running (pid {found.pid})",
            "stopped": "stopped",
            "not created": "not created yet (the first command without a DSN creates it)",
        }.get(found.state, f"{found.state} (pid {found.pid})")
        typer.echo(f"embedded PostgreSQL: {state}")
        typer.echo(f"data directory:      {found.data_dir}")
        typer.echo(f"log file:            {found.log_file}")
        if found.dsn:
            typer.echo(f"dsn:                 {found.dsn}")
    if not found.running:
        raise typer.Exit(3)


@embedded_app.command("start")
def start(data_dir: DataDirOption = None) -> None:
    """Start it (creating it on first use) unless it runs; print its URI, e.g. for TASKQUEUE_DSN."""
    typer.echo(EmbeddedServer(data_dir).start())


@embedded_app.command("stop")
def stop(data_dir: DataDirOption = None) -> None:
    """Stop it (ends open sessions; workers reconnect once it runs again). The data stays."""
    server = EmbeddedServer(data_dir)
    if server.stop():
        typer.echo(f"stopped the embedded PostgreSQL in {server.data_dir}")
    else:
        typer.echo(f"the embedded PostgreSQL in {server.data_dir} was not running")


def register(app: typer.Typer) -> None:
    app.add_typer(embedded_app, name="embedded", rich_help_panel=ADMIN)
