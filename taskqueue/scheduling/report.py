"""Tables, JSON and PNG figures of simulator results (seed 003's Figures 1-6).

matplotlib is imported only when a figure is drawn (it is in the ``bench``
extra), so the table and JSON need nothing beyond the standard library.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from .simulate import Result, WaitStats

BANDS = 10  # more priorities than this are reported in bands


def bands(priorities: int) -> list[tuple[int, int]]:
    """Priority groups for tables and plots: each priority alone, or ten bands for many."""
    if priorities <= BANDS:
        return [(p, p) for p in range(priorities)]
    width = -(-priorities // BANDS)
    return [(lo, min(priorities - 1, lo + width - 1)) for lo in range(0, priorities, width)]


def band_waits(result: Result, band: tuple[int, int]) -> list[int]:
    return [w for p, ws in result.waits.items() if band[0] <= p <= band[1] for w in ws]


def band_label(band: tuple[int, int]) -> str:
    return f"priority {band[0]}" if band[0] == band[1] else f"priorities {band[0]}-{band[1]}"


def summary(results: Mapping[str, Result], priorities: int) -> dict[str, Any]:
    """Per policy: utilisation and wait statistics per priority (band)."""
    out: dict[str, Any] = {}
    for policy, result in results.items():
        rows = {}
        for band in bands(priorities):
            unstarted = sum(n for p, n in result.unstarted.items() if band[0] <= p <= band[1])
            rows[band_label(band)] = asdict(WaitStats.of(band_waits(result, band), unstarted))
        out[policy] = {"utilisation": result.utilisation, "waits": rows}
        if result.large_waits:
            out[policy]["large_task_max_wait"] = max(result.large_waits)
    return out


def table(summary_: Mapping[str, Any]) -> str:
    """A plain-text table: one row per (policy, priority)."""
    header = f"{'policy':<9} {'priority':<16} {'tasks':>6} {'mean':>8} {'p95':>7} {'max':>7} {'waiting':>7} {'util':>6}"
    lines = [header]
    for policy, data in summary_.items():
        for label, s in data["waits"].items():
            lines.append(
                f"{policy:<9} {label:<16} {s['count']:>6} {s['mean']:>8.2f} {s['p95']:>7.0f} {s['max']:>7.0f} "
                f"{s['unstarted']:>7} {data['utilisation']:>6.3f}"
            )
    return "\n".join(lines)


def _pyplot() -> Any:
    try:
        import matplotlib
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise RuntimeError("figures need matplotlib: pip install 'taskqueue[bench]'") from exc
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plot_waits(results: Mapping[str, Result], priorities: int, path: Path) -> Path:
    """Histograms of waiting time, one row per policy, one column per priority (band): Figures 5 and 6."""
    plt = _pyplot()
    groups = bands(priorities)
    fig, axes = plt.subplots(len(results), len(groups), figsize=(4 * len(groups), 2.6 * len(results)), squeeze=False)
    for row, (policy, result) in enumerate(results.items()):
        for col, band in enumerate(groups):
            ax = axes[row][col]
            waits = band_waits(result, band)
            top = max(1, int(_percentile(waits, 0.99)))
            ax.hist([min(w, top) for w in waits], bins=min(40, top + 1), color=f"C{row}")
            mean = sum(waits) / len(waits) if waits else 0.0
            ax.set_title(f"{policy}: {band_label(band)} (mean {mean:.2f})", fontsize=9)
            ax.set_xlabel("waiting time (ticks; capped at p99)", fontsize=8)
            ax.set_ylabel("tasks", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path


def plot_executing(results: Mapping[str, Result], capacities: Sequence[int], path: Path, window: int = 200) -> Path:
    """Capacity in use over the first ``window`` ticks, per policy and worker: Figures 1-4."""
    plt = _pyplot()
    fig, axes = plt.subplots(len(results), 1, figsize=(10, 2.2 * len(results)), squeeze=False, sharex=True)
    for row, (policy, result) in enumerate(results.items()):
        ax = axes[row][0]
        for i, series in enumerate(result.executing):
            shown = series[:window]
            ax.step(range(len(shown)), shown, where="post", label=f"worker {i} (cap {capacities[i]})")
        ax.set_ylim(0, max(capacities) + 1)
        ax.set_title(f"{policy}: executing points (utilisation {result.utilisation:.1%})", fontsize=9)
        ax.set_ylabel("in use", fontsize=8)
        if len(result.executing) > 1:
            ax.legend(fontsize=7, loc="lower right")
    axes[-1][0].set_xlabel("tick", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path


def plot_starvation(lengths: Sequence[int], series: Mapping[str, Sequence[float]], bound: float, path: Path) -> Path:
    """The large tasks' max wait against run length: greedy grows, strict and backfill stay under the bound."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6, 3.5))
    for policy, values in series.items():
        ax.plot(lengths, values, marker="o", label=policy)
    ax.axhline(bound, color="grey", linestyle="--", label=f"bound ({bound:g} ticks)")
    ax.set_xscale("log")
    ax.set_yscale("symlog")
    ax.set_xlabel("run length (ticks)")
    ax.set_ylabel("max wait of large tasks (ticks)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path


def _percentile(values: Sequence[float], q: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return float(ordered[min(len(ordered) - 1, int(q * len(ordered)))])
