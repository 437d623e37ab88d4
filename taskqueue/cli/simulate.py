"""``simulate``: the scheduling policies on a synthetic stream, on a virtual clock, without a database."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

from ..scheduling import POLICIES
from ..scheduling.report import plot_executing, plot_starvation, plot_waits, summary, table
from ..scheduling.simulate import compare, starvation_bound, starvation_series
from ..scheduling.workload import SCENARIOS, Workload
from .common import CliError

STARVATION_LENGTHS = (500, 1000, 2000, 4000, 8000)
ALL_POLICIES = ",".join(POLICIES)


def _pair(value: str, flag: str) -> tuple[int, int]:
    try:
        lo, _, hi = value.partition("-")
        pair = (int(lo), int(hi or lo))
    except ValueError:
        raise CliError(f"{flag} must be LOW-HIGH, e.g. 1-15; got {value!r}", 2) from None
    return pair


def _ints(value: str, flag: str) -> tuple[int, ...]:
    try:
        return tuple(int(v) for v in value.split(",") if v.strip())
    except ValueError:
        raise CliError(f"{flag} must be comma-separated integers; got {value!r}", 2) from None


PoliciesOption = Annotated[str, typer.Option("--policies", help="Comma-separated policies to compare.")]
ScenarioOption = Annotated[str, typer.Option("--scenario", help="pfn (seed 003's workload) or starvation.")]
CapacitiesOption = Annotated[str, typer.Option("--capacities", help="One capacity per worker, comma-separated.")]
SizesOption = Annotated[str | None, typer.Option("--sizes", help="Task sizes LOW-HIGH (pfn 1-15, starvation 1-3).")]
RuntimesOption = Annotated[
    str | None, typer.Option("--runtimes", help="Run times in ticks, LOW-HIGH (pfn 2-6, starvation 1-8).")
]
LoadOption = Annotated[
    float | None, typer.Option("--load", help="Offered load, work per tick / capacity (pfn 0.9, starvation 0.95).")
]
ErrorOption = Annotated[float, typer.Option("--estimate-error", help="Estimates off by up to this fraction.")]
DepthOption = Annotated[int, typer.Option("--depth", min=1, help="Reservations per worker (1: EASY backfilling).")]


def simulate(
    policies: PoliciesOption = ALL_POLICIES,
    scenario: ScenarioOption = "pfn",
    capacities: CapacitiesOption = "15",
    priorities: Annotated[int, typer.Option("--priorities", help="Number of priorities, 1..101.")] = 2,
    high_share: Annotated[float, typer.Option("--high-share", help="Two priorities: share of priority 0.")] = 0.8,
    sizes: SizesOption = None,
    runtimes: RuntimesOption = None,
    load: LoadOption = None,
    ticks: Annotated[int, typer.Option("--ticks", help="Ticks during which tasks arrive.")] = 4000,
    estimate_error: ErrorOption = 0.0,
    depth: DepthOption = 1,
    seed: Annotated[int, typer.Option("--seed", help="Random seed of the stream.")] = 1,
    plots: Annotated[Path | None, typer.Option("--plots", help="Write PNG figures into this folder.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the results as JSON.")] = False,
) -> None:
    """Compare greedy, strict and backfill on a synthetic arrival stream (seed 003), with the workers' own plan code."""
    chosen = [p.strip() for p in policies.split(",") if p.strip()]
    unknown = [p for p in chosen if p not in POLICIES]
    if unknown or not chosen:
        raise CliError(f"--policies must name some of {', '.join(POLICIES)}; got {policies!r}", 2)
    if scenario not in SCENARIOS:
        raise CliError(f"--scenario must be one of {', '.join(SCENARIOS)}; got {scenario!r}", 2)
    try:
        workload = Workload.for_scenario(
            scenario,
            capacities=_ints(capacities, "--capacities"),
            priorities=priorities,
            high_share=high_share,
            sizes=None if sizes is None else _pair(sizes, "--sizes"),
            runtimes=None if runtimes is None else _pair(runtimes, "--runtimes"),
            load=load,
            ticks=ticks,
            estimate_error=estimate_error,
            seed=seed,
        )
    except ValueError as exc:
        raise CliError(str(exc), 2) from None
    results = compare(workload, chosen, depth=depth)
    doc: dict[str, Any] = {
        "workload": {k: getattr(workload, k) for k in workload.__dataclass_fields__},
        "policies": summary(results, priorities),
    }
    lengths: list[int] = []
    series: dict[str, list[float]] = {}
    bound = starvation_bound(workload)
    if scenario == "starvation":
        lengths = [n for n in STARVATION_LENGTHS if n <= max(ticks, STARVATION_LENGTHS[0])]
        series = starvation_series(workload, lengths, chosen)
        doc["starvation"] = {"lengths": lengths, "max_wait": series, "bound": bound}
    files: list[Path] = []
    if plots is not None:
        plots.mkdir(parents=True, exist_ok=True)
        files.append(plot_waits(results, priorities, plots / f"scheduling-{scenario}-waits.png"))
        files.append(plot_executing(results, workload.capacities, plots / f"scheduling-{scenario}-executing.png"))
        if series:
            files.append(plot_starvation(lengths, series, bound, plots / "scheduling-starvation.png"))
        doc["plots"] = [str(f) for f in files]
    if as_json:
        typer.echo(json.dumps(doc, indent=2, default=list))
        return
    typer.echo(table(doc["policies"]))
    if series:
        typer.echo(f"\nlarge tasks' max wait by run length (bound {bound:g} ticks):")
        for policy, values in series.items():
            cells = "  ".join(f"{n}: {v:g}" for n, v in zip(lengths, values, strict=True))
            typer.echo(f"  {policy:<9} {cells}")
    for f in files:
        typer.echo(f"wrote {f}")


def register(app: typer.Typer) -> None:
    app.command("simulate")(simulate)
