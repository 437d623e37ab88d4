"""The markdown tables of docs/performance.md from a ``python -m bench shapes`` result."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from . import common


def _markdown(header: list[str], rows: Iterable[list[str]]) -> str:
    """A markdown table: one header row, a rule, then a row per list of cells."""
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def _ceiling(x: dict[str, Any]) -> str:
    """By id against naive: the highest ratio any claim making the same two writes could reach."""
    return f"{common.ratio(x['by_id_per_s'], x['naive_per_s']):,.2f}×"


def table(result: dict[str, Any]) -> str:
    """The markdown table of docs/performance.md, from a ``shapes`` result."""
    header = ["shape", "what", "naive x1", "ours x1", "ratio x1", "naive x8", "ours x8", "ratio x8", "goal",
              "p99 10k → 1M", "growth", "claim_many p99/task 10k → 1M", "met"]
    rows = []
    for s in result["shapes"]:
        one, eight = s["x1"], s[f"x{result['clients']}"]
        batch = s["batch_p99_ms_per_task"]
        rows.append([s["shape"], s["what"], f"{one['naive_per_s']:,.1f}/s", f"{one['ours_per_s']:,.1f}/s",
                     f"{one['ratio']:,.2f}×", f"{eight['naive_per_s']:,.1f}/s", f"{eight['ours_per_s']:,.1f}/s",
                     f"{eight['ratio']:,.2f}×", f"≥ {s['target_ratio']:g}×",
                     f"{s['p99_ms']['small']:.2f} → {s['p99_ms']['big']:.2f} ms", f"{s['p99_growth']:.2f}×",
                     f"{batch['small']:.3f} → {batch['big']:.3f} ms", "yes" if s["met"] else "no"])
    return _markdown(header, rows)


def ceiling_table(result: dict[str, Any]) -> str:
    """Ours against the by-id ceiling: the highest ratio to naive any claim could reach on this server."""
    header = ["shape", "by id x1", "ours / by id x1", "by id / naive x1", "by id x8", "ours / by id x8",
              "by id / naive x8"]
    rows = []
    for s in result["shapes"]:
        cells = [s["shape"]]
        for c in (1, result["clients"]):
            x = s[f"x{c}"]
            cells += ([f"{x['by_id_per_s']:,.1f}/s", f"{x['of_ceiling']:.2f}", _ceiling(x)]
                      if "by_id_per_s" in x else ["–", "–", "–"])
        rows.append(cells)
    return _markdown(header, rows)


def record_table(result: dict[str, Any], before: dict[str, Any] | None = None, before_name: str = "") -> str:
    """The compact table of a run of record: both ratios, both growths, and ours against the by-id ceiling.

    "met" is the benchmark's flag (both ratios and the single claim's p99
    growth); the claim of 100's growth is judged in its own column, with its
    p50 beside it where the run sampled it (a p99 of few calls is one stall).
    ``before``: an earlier run whose ratios and growth go in a last column,
    so that each row says where its shape stood.
    """
    header = ["shape", "ratio x1", "ratio x8", "goal", "p99 growth", "claim_many p99/task growth (at 1M)",
              "claim_many p50 growth", "ours / by id (x1 / x8)", "by id / naive (x1 / x8)", "met"]
    earlier = {s["shape"]: s for s in before["shapes"]} if before else {}
    if before:
        header.append(f"before ({before_name}: x1 / x8 / growth)")
    rows = []
    for s in result["shapes"]:
        one, many = s["x1"], s[f"x{result['clients']}"]
        batch_ok = s.get("batch_met", s["batch_p99_growth"] <= 1.5)
        p50 = s.get("batch_p50_growth")
        row = [s["shape"], f"{one['ratio']:,.2f}×", f"{many['ratio']:,.2f}×", f"≥ {s['target_ratio']:g}×",
               f"{s['p99_growth']:.2f}×",
               f"{s['batch_p99_growth']:.2f}×{'' if batch_ok else ' (over 1.5×)'} "
               f"({s['batch_p99_ms_per_task']['big']:.2f} ms)",
               "–" if p50 is None else f"{p50:.2f}×",
               f"{one['of_ceiling']:.2f} / {many['of_ceiling']:.2f}",
               f"{_ceiling(one)} / {_ceiling(many)}", "yes" if s["met"] else "no"]
        if before:
            e = earlier.get(s["shape"])
            if e is None:
                row.append("–")
            else:
                then = e[f"x{before['clients']}"]["ratio"]
                row.append(f"{e['x1']['ratio']:,.2f}× / {then:,.2f}× / {e['p99_growth']:.2f}×")
        rows.append(row)
    return _markdown(header, rows)


def lean_table(result: dict[str, Any]) -> str:
    """Each shape against the issue's own reference, the naive query on a lean copy of the rows.

    The copy's naive loop, ours, their ratio, at 1 and at the run's many
    consumers; then the ratio to the naive query on the queue's own table
    (the earlier runs' reference), the single claim's p99 growth, and
    whether every target holds against the copy (``met_lean``). Shapes
    measured before the copy was added have no lean figures, and get none.
    """
    many = result["clients"]
    header = ["shape", "goal", "lean copy x1", "ours x1", "ratio to the copy x1", f"lean copy x{many}",
              f"ours x{many}", f"ratio to the copy x{many}", f"ratio to naive on tasks (x1 / x{many})",
              "p99 growth", "met against the copy"]
    rows = []
    for s in result["shapes"]:
        one, eight = s["x1"], s[f"x{many}"]
        if "ratio_lean" not in one:
            continue
        rows.append([s["shape"], f"≥ {s['target_ratio']:g}×",
                     f"{one['naive_lean_per_s']:,.1f}/s", f"{one['ours_per_s']:,.1f}/s", f"{one['ratio_lean']:,.2f}×",
                     f"{eight['naive_lean_per_s']:,.1f}/s", f"{eight['ours_per_s']:,.1f}/s",
                     f"{eight['ratio_lean']:,.2f}×", f"{one['ratio']:,.2f}× / {eight['ratio']:,.2f}×",
                     f"{s['p99_growth']:.2f}×", "yes" if s["met_lean"] else "no"])
    return _markdown(header, rows)
