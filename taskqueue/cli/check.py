"""``taskqueue check``: the invariant checker, for operators and monitoring.

Exit status 0 when every invariant holds (warnings allowed), 1 on any
violation, so it can run from cron or a health probe as is.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer
from rich.table import Table

if TYPE_CHECKING:  # the checker loads psycopg; the CLI imports it only when checking
    from ..invariants import CheckReport, Violation
from .common import INSPECT, DsnOption, JsonOption, SchemaOption, open_queue, out, print_json

RepairOption = Annotated[
    bool,
    typer.Option(
        "--repair",
        help="Fix what can be fixed (pool counts, stray leases, lease-less running tasks, overdue "
        "scheduled tasks) in one transaction, report the changes, then check again.",
    ),
]


def register(app: typer.Typer) -> None:
    app.command("check", rich_help_panel=INSPECT)(check)


def check(
    ctx: typer.Context,
    repair: RepairOption = False,
    json_: JsonOption = False,
    dsn: DsnOption = None,
    schema: SchemaOption = None,
) -> None:
    """Check the queue's invariants in one consistent snapshot; exit 1 on any violation."""
    with open_queue(ctx, dsn, schema) as tq:
        report = tq.check(repair=repair)
    if json_:
        print_json(report.to_dict())
    else:
        print_report(report)
    if not report.ok:
        raise typer.Exit(1)


def _table(title: str, groups: tuple[Violation, ...]) -> Table:
    table = Table(title=title, title_justify="left", show_lines=False)
    table.add_column("check")
    table.add_column("subject")
    table.add_column("description")
    for group in groups:
        for row in group.rows:
            table.add_row(group.check, str(row["subject"]), str(row["description"]))
    return table


def print_report(report: CheckReport) -> None:
    before = tuple(v for v in report.found_before_repair if v.severity == "violation")
    if before:
        out.print(_table("found before repair", before))
    if report.repaired:
        table = Table(title="repaired", title_justify="left")
        table.add_column("action")
        table.add_column("subject")
        table.add_column("change")
        for item in report.repaired:
            table.add_row(item.action, item.subject, item.detail)
        out.print(table)
    elif before:
        out.print("repaired: nothing could be repaired")
    if report.violations:
        out.print(_table("violations", report.violations))
    if report.warnings:
        out.print(_table("warnings", report.warnings))
    count = sum(len(v.rows) for v in report.violations)
    warned = sum(len(v.rows) for v in report.warnings)
    at = report.checked_at.isoformat(sep=" ", timespec="seconds")
    if report.ok:
        out.print(f"ok: every invariant holds at {at}" + (f" ({warned} warning(s))" if warned else ""))
    else:
        out.print(f"FAILED: {count} violation(s)" + (f", {warned} warning(s)" if warned else "") + f" at {at}")
