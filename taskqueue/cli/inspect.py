"""Read-only views: ``stats [--json] [--watch]``, ``tasks [...]`` and ``tasks show ID``."""

from __future__ import annotations

import json
import time
from typing import Annotated, Any

import typer
from rich.console import Group
from rich.live import Live
from rich.table import Table

from ..stats import Stats
from ..task import STATES
from .common import (
    INSPECT,
    CliError,
    DsnOption,
    JsonOption,
    SchemaOption,
    existing_task,
    fmt_seconds,
    group_app,
    jsonable,
    open_queue,
    out,
    print_json,
    task_dict,
)
from .pools import pools_table


def stats_view(stats: Stats) -> Group:
    """Tables for people: depth by queue and state, waiting by priority, pools, workers, totals."""
    states = Table(title="tasks by queue and state")
    states.add_column("queue")
    for state in STATES:
        states.add_column(state, justify="right")
    for queue, counts in sorted(stats.by_queue.items()):
        states.add_row(queue, *(str(counts.get(s, 0)) for s in STATES))
    states.add_row("(all)", *(str(stats.by_state.get(s, 0)) for s in STATES), style="bold")

    waiting = Table(title="waiting by priority")
    for column in ("queue", "priority", "waiting", "oldest wait"):
        waiting.add_column(column, justify="left" if column == "queue" else "right")
    for row in stats.waiting_by_priority:
        waiting.add_row(row.queue, str(row.priority), str(row.waiting), fmt_seconds(row.oldest_wait_seconds))

    workers = Table(title="workers (live) and their reservations")
    for column in ("worker", "pid", "policy", "capacity", "in use", "running", "reserved task", "for", "since"):
        workers.add_column(column, justify="left" if column in ("worker", "policy") else "right")
    for w in stats.workers:
        r = w.reservation
        workers.add_row(
            w.name, str(w.pid), w.policy, "-" if w.capacity is None else str(w.capacity), str(w.in_use),
            str(w.running), "-" if r is None else str(r.task_id), "-" if r is None else str(r.required),
            "-" if r is None else fmt_seconds((stats.database_time - r.since).total_seconds()),
        )

    # Two short lines: one long line was cut at the edge of a 120-column --watch view.
    summary = (
        f"total {stats.total}  ·  parked {stats.parked}"
        f"  ·  oldest waiting {fmt_seconds(stats.oldest_waiting_seconds)}\n"
        f"throughput {stats.throughput_per_second:.2f}/s (last minute)"
        f"  ·  at {stats.database_time.isoformat()}"
    )
    return Group(states, waiting, pools_table(stats.pools), workers, summary)


def stats(
    ctx: typer.Context,
    as_json: JsonOption = False,
    watch: Annotated[bool, typer.Option("--watch", "-w", help="Refresh until Ctrl-C.")] = False,
    interval: Annotated[float, typer.Option("--interval", min=0.1, help="Seconds between refreshes.")] = 2.0,
    dsn: DsnOption = None,
    schema: SchemaOption = None,
) -> None:
    """Depth by queue, state and priority; pools and their use; live workers and reservations; throughput."""
    with open_queue(ctx, dsn, schema) as tq:
        if not watch:
            data = tq.stats()
            if as_json:
                print_json(data.to_dict())
            else:
                out.print(stats_view(data))
            return
        try:
            if as_json:
                while True:  # one JSON document per line, for scripts that tail it
                    typer.echo(json.dumps(jsonable(tq.stats().to_dict()), sort_keys=True))
                    time.sleep(interval)
            with Live(stats_view(tq.stats()), console=out, auto_refresh=False) as live:
                while True:
                    time.sleep(interval)
                    live.update(stats_view(tq.stats()), refresh=True)
        except KeyboardInterrupt:
            return


def _tasks_table(tasks: list[Any]) -> Table:
    table = Table(title=f"{len(tasks)} task(s), newest first")
    for column in ("id", "queue", "state", "pri", "req", "pool", "att", "run_at", "worker", "error"):
        table.add_column(
            column,
            justify="right" if column in ("id", "pri", "req", "att") else "left",
            no_wrap=column not in ("worker", "error"),
            overflow="fold",
            min_width=8 if column in ("worker", "error") else None,
        )
    for t in tasks:
        table.add_row(
            str(t.id),
            t.queue,
            t.state,
            str(t.priority),
            str(t.required),
            t.pool or "-",
            f"{t.attempts}/{t.max_attempts}",
            t.run_at.strftime("%H:%M:%S") if t.run_at else "-",
            t.worker or "-",
            (t.error or "")[:60],
        )
    return table


tasks_app = group_app("List tasks, or show one with `tasks show ID`.")


@tasks_app.callback()
def tasks(
    ctx: typer.Context,
    state: Annotated[str | None, typer.Option("--state", "-s", help=f"One of {', '.join(STATES)}.")] = None,
    queue: Annotated[str | None, typer.Option("--queue", "-q", help="Only this queue.")] = None,
    limit: Annotated[int, typer.Option("--limit", "-n", min=1, help="How many, newest first.")] = 50,
    as_json: JsonOption = False,
    dsn: DsnOption = None,
    schema: SchemaOption = None,
) -> None:
    """List the newest tasks, optionally of one state and queue."""
    if ctx.invoked_subcommand is not None:
        return
    if state is not None and state not in STATES:
        raise CliError(f"--state must be one of {', '.join(STATES)}, got {state!r}", 2)
    with open_queue(ctx, dsn, schema) as tq:
        found = tq.tasks(state=state, queue=queue, limit=limit)
    if as_json:
        print_json([task_dict(t) for t in found])
    else:
        out.print(_tasks_table(found))


@tasks_app.command("show")
def show(
    ctx: typer.Context,
    task_id: Annotated[int, typer.Argument(metavar="ID", min=1, help="The task's id.")],
    as_json: JsonOption = False,
    dsn: DsnOption = None,
    schema: SchemaOption = None,
) -> None:
    """Every field of one task."""
    with open_queue(ctx, dsn, schema) as tq:
        task = existing_task(tq, task_id)
    data = task_dict(task)
    if as_json:
        print_json(data)
        return
    table = Table(title=f"task {task.id}", show_header=False)
    table.add_column("field", style="bold")
    table.add_column("value")
    for key, value in data.items():
        text = json.dumps(value, ensure_ascii=False) if isinstance(value, (dict, list)) else str(value)
        table.add_row(key, "-" if value is None else text)
    out.print(table)


def register(app: typer.Typer) -> None:
    app.command("stats", rich_help_panel=INSPECT)(stats)
    app.add_typer(tasks_app, name="tasks", rich_help_panel=INSPECT)
