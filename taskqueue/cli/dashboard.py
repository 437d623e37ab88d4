"""``dashboard [--host 127.0.0.1] [--port 8080] [--read-only]``: serve the web dashboard with uvicorn.

Loopback by default. Any other address needs basic-auth credentials (flags
or TASKQUEUE_DASHBOARD_USER / TASKQUEUE_DASHBOARD_PASSWORD), checked before
anything starts.
"""

from __future__ import annotations

from typing import Annotated

import typer

from .common import RUN, CliError, DsnOption, SchemaOption, open_queue

MISSING_EXTRA = "the dashboard needs the 'dashboard' extra: pip install 'taskqueue[dashboard]'"


def dashboard(
    ctx: typer.Context,
    host: Annotated[
        str, typer.Option("--host", help="Address to bind; anything but loopback needs credentials.")
    ] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", min=1, max=65535, help="TCP port.")] = 8080,
    read_only: Annotated[bool, typer.Option("--read-only", help="Show everything, change nothing.")] = False,
    user: Annotated[str | None, typer.Option("--user", help="Basic-auth user (or TASKQUEUE_DASHBOARD_USER).")] = None,
    password: Annotated[
        str | None,
        typer.Option("--password", help="Basic-auth password (or TASKQUEUE_DASHBOARD_PASSWORD, kept out of ps)."),
    ] = None,
    no_migrate: Annotated[bool, typer.Option("--no-migrate", help="Do not bring the schema up to date first.")] = False,
    dsn: DsnOption = None,
    schema: SchemaOption = None,
) -> None:
    """Serve the web dashboard (overview, tasks, pools, workers, failures, /metrics)."""
    try:
        import uvicorn

        from ..dashboard import create_app
        from ..dashboard.security import check_bind, credentials_from
    except ImportError as exc:
        raise CliError(f"{MISSING_EXTRA} ({exc})") from None
    credentials = credentials_from(user, password)
    check_bind(host, credentials)
    with open_queue(ctx, dsn, schema) as tq:
        if not no_migrate:
            tq.migrate()
        app = create_app(tq, read_only=read_only, credentials=credentials)
        shown = f"[{host}]" if ":" in host else host
        typer.echo(
            f"taskqueue dashboard on http://{shown}:{port}/ (schema {tq.schema}"
            f"{', read-only' if read_only else ''}{', basic auth' if credentials else ''}); Ctrl-C stops it",
            err=True,
        )
        uvicorn.run(app, host=host, port=port, log_level="warning", access_log=False, server_header=False)


def register(app: typer.Typer) -> None:
    app.command("dashboard", rich_help_panel=RUN)(dashboard)
