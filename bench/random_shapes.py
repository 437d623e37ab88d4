"""Shapes nobody wrote: random mixes of priorities, sizes, fit, order, queues and pools (issue #9).

``bench shapes`` measures 47 shapes chosen by hand, each built to hurt some
part of the claim. This scenario draws shapes at random from the same parts
and a few more (priorities that are negative, shuffled deadlines or epoch
seconds; sizes that are bimodal, log-normal, linked to priority, zero for a
third of the tasks, or in bytes), with ``available`` set at a quantile of the
sizes (from 0.05% of the tasks fitting to all of them), either order, one
queue, 100 queues or a list of 20 of 40, and pools half full a quarter of the
time. Each shape is seeded at ``--rows`` (default 200,000) and measured with
one consumer, ours against the naive query side by side, as ``bench shapes``
does (same clients, same naive index, same reset). The point is to find a
shape where the claim falls far below the naive query, before a user does.

``python -m bench random_shapes [--rows N] [--seconds S] [--count N] [--seed S]``
"""

from __future__ import annotations

import dataclasses
import random
from typing import Any

import psycopg

from . import common
from . import shapes as S

DEFAULT_ROWS = 200_000
DEFAULT_COUNT = 30
PRIORITIES = {
    "const": "0",
    "few": "(g * 31) %% 10",
    "hundreds": "(g * 7919) %% 300",
    "distinct": "g",
    "shuffled": "(g * 7919) %% n",
    "desc_id": "n - g",
    "negative": "-((g * 13) %% 1000)",
    "epoch": "1700000000 + (g * 7919) %% 86400",
}
SIZES = {
    "levels": "1 + (g * 7919) %% 10",
    "mb": "1 + ((g * 7919) %% 1000000)",
    "falling": "1 + (n - g) * 1000000 / n",
    "rising": "1 + g * 1000000 / n",
    "bimodal": "CASE WHEN (g * 7919) %% 10 = 0 THEN 1 ELSE 1000000 END",
    "lognormal": "1 + floor(exp(((g * 7919) %% 1000) / 60.0))::bigint",
    "bytes": "1000000000 + ((g * 104729) %% 2000000) - 1000000",
    "zero_mix": "CASE WHEN g %% 3 = 0 THEN 0 ELSE 1 + (g * 7919) %% 100 END",
    "priority_linked": "1 + ((g * 7919) %% 300) * 3",
}
FIT_SHARES = (0.0005, 0.01, 0.3, 0.5, 0.9, 1.0)
QUEUES = ((1, 0), (1, 0), (100, 0), (40, 20))


def draw(rng: random.Random, index: int) -> tuple[S.Shape, float]:
    """One random shape (its ``available`` is set after seeding, from the sizes) and its fit share."""
    priority, size = rng.choice(list(PRIORITIES)), rng.choice(list(SIZES))
    share, order = rng.choice(FIT_SHARES), rng.choice(("min", "min", "max"))
    pools = rng.random() < 0.25
    queues, listed = rng.choice(QUEUES)
    name = (f"r{index}_{priority}_{size}_{share:g}_{order}{'_pools' if pools else ''}"
            f"{f'_q{queues}' if queues > 1 else ''}{f'l{listed}' if listed else ''}")
    shape = S.Shape(name, name, PRIORITIES[priority], SIZES[size], 1, order=order, pools=pools, queues=queues,
                    listed=listed)
    return shape, share


def measure(dsn: str, shape: S.Shape, share: float, rows: int, seconds: float) -> dict[str, Any]:
    common.console.log(f"random_shapes: {shape.name}: seeding {rows:,} rows")
    S.seed(dsn, S.SCHEMA, shape, rows)
    with psycopg.connect(dsn) as conn:
        conn.execute(f'SET search_path = "{S.SCHEMA}"')
        row = conn.execute("SELECT percentile_disc(%s) WITHIN GROUP (ORDER BY required) FROM tasks",
                           (share,)).fetchone()
    assert row is not None
    shape = dataclasses.replace(shape, available=int(row[0]))
    args = {"dsn": dsn, "schema": S.SCHEMA, "shape": shape, "cap": max(1, rows // 4)}
    naive = S._naive_phase(dsn, shape, 1, args, seconds)
    ours, lat = S._phase(S._ours_client, 1, args, f"{shape.name} ours x1", seconds)
    S.reset(dsn, S.SCHEMA)
    return {"shape": shape.name, "available": shape.available, "fit_share": share, "naive_per_s": naive,
            "ours_per_s": ours, "ratio": common.ratio(ours, naive) if naive else None,
            "ours_claim": common.latency_summary(lat)}


def run(opts: common.Options) -> dict[str, Any]:
    rows = opts.rows or DEFAULT_ROWS
    seconds = opts.seconds or 3.0
    count = opts.count or DEFAULT_COUNT
    seed = opts.seed if opts.seed is not None else 1
    rng = random.Random(seed)
    results = [measure(opts.dsn, *draw(rng, i), rows, seconds) for i in range(count)]
    common.drop_schema(opts.dsn, S.SCHEMA)
    ratios = [r["ratio"] for r in results if r["ratio"] is not None]
    return {
        "scenario": "random_shapes", "rows": rows, "seconds_per_phase": seconds, "count": count, "seed": seed,
        "shapes": results,
        "min_ratio": min(ratios) if ratios else None,
        "below_0_8": [r["shape"] for r in results if r["ratio"] is not None and r["ratio"] < 0.8],
        # A shape where nothing fits at all (every fit in a full pool): both sides stop at their first claim.
        "nothing_claimable": [r["shape"] for r in results if r["ratio"] is None],
    }


def table(result: dict[str, Any]) -> str:
    """The markdown table of docs/performance.md, from a ``random_shapes`` result."""
    lines = ["| shape | available | naive x1 | ours x1 | ratio | ours p99 |", "|---|---|---|---|---|---|"]
    for s in sorted(result["shapes"], key=lambda s: s["ratio"] if s["ratio"] is not None else -1):
        ratio = "-" if s["ratio"] is None else f"{s['ratio']:.2f}x"
        lines.append(f"| {s['shape']} | {s['available']:,} | {s['naive_per_s']:,.1f}/s | {s['ours_per_s']:,.1f}/s | "
                     f"{ratio} | {s['ours_claim']['p99_ms']:.2f} ms |")
    return "\n".join(lines)
