"""Shapes nobody wrote: random mixes of priorities, sizes, fit, order, queues and pools (issue #9).

``bench shapes`` measures 47 shapes chosen by hand, each built to hurt some
part of the claim. This scenario draws shapes at random from the same parts
and a few more (priorities that are negative, shuffled deadlines or epoch
seconds; sizes that are bimodal, log-normal, linked to priority, zero for a
third of the tasks, or in bytes), with ``available`` set at a quantile of the
sizes (from 0.05% of the tasks fitting to all of them), either order, one
queue, 100 queues or a list of 20 of 40, and pools half full a quarter of the
time. Each shape is seeded at ``--rows`` (default 200,000) and measured with
one consumer (``--clients N``: N a side, each capped at its share of a
quarter of the rows), ours against the naive query side by side, as ``bench shapes``
does (same clients, same naive index, same reset). The point is to find a
shape where the claim falls far below the naive query, before a user does.

A shape where every fitting task sits in a full pool has nothing to claim;
for it the scenario also times ``EMPTY_CLAIMS`` empty claims in a row and
counts the fits parked after each (the first claims pay for parking them),
against one naive query that finds nothing.

``--wide`` draws, beside each shape's parts, what the plain draw keeps fixed:
an amount drawn per claim between two quantiles of the sizes (workers of
many sizes on one queue), and 1,000 queues, a list of 3 of 1,000 or a list
of one queue of 200 (a consumer whose queues are a sliver of the shared
order). Those extra parts come from a second generator per shape, so the
plain draw of a seed is unchanged; wide shapes are named ``w<index>_...``.

``python -m bench random_shapes [--rows N] [--seconds S] [--count N] [--seed S] [--only r19,r22] [--wide]
[--clients 8]`` (``--only``: the shapes whose names start with one of these; the others are
still drawn, so the names and shapes stay those of the full run).
"""

from __future__ import annotations

import dataclasses
import random
import time
from typing import Any

import psycopg

from . import common
from . import shapes as S
from .shape_catalog import Shape

DEFAULT_ROWS = 200_000
DEFAULT_COUNT = 30
EMPTY_CLAIMS = 30
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
#: --wide: queue layouts the plain draw never makes, each taking the place of its draw half the time.
WIDE_QUEUES = ((1000, 0), (1000, 3), (200, 1))
#: --wide: the share of tasks that fit the smallest amount drawn per claim (the largest is the shape's share).
WIDE_LOW_SHARE = 0.05


def draw(rng: random.Random, index: int, wide: random.Random | None = None) -> tuple[Shape, float, bool]:
    """One random shape (its ``available`` is set after seeding, from the sizes), its fit share, and
    whether the amount is drawn per claim (``wide`` only: the extra parts come from that generator)."""
    priority, size = rng.choice(list(PRIORITIES)), rng.choice(list(SIZES))
    share, order = rng.choice(FIT_SHARES), rng.choice(("min", "min", "max"))
    pools = rng.random() < 0.25
    queues, listed = rng.choice(QUEUES)
    per_claim = False
    if wide is not None:
        per_claim = share > WIDE_LOW_SHARE and wide.random() < 0.5
        if wide.random() < 0.5:
            queues, listed = wide.choice(WIDE_QUEUES)
    name = (f"{'w' if wide is not None else 'r'}{index}_{priority}_{size}_{share:g}_{order}"
            f"{'_avar' if per_claim else ''}{'_pools' if pools else ''}"
            f"{f'_q{queues}' if queues > 1 else ''}{f'l{listed}' if listed else ''}")
    shape = Shape(name, name, PRIORITIES[priority], SIZES[size], 1, order=order, pools=pools, queues=queues,
                  listed=listed)
    return shape, share, per_claim


def drawn(seed: int, count: int, wide: bool, only: str | None) -> list[tuple[Shape, float, bool]]:
    """The shapes a draw of ``seed`` makes (all ``count`` are drawn, so names match the full run), those
    whose names start with one of the comma-separated ``only`` when given."""
    rng = random.Random(seed)
    prefixes = tuple(f"{name}_" for name in only.split(",")) if only else None
    # The wide parts come from a generator of their own per shape, so the plain parts match the plain draw.
    shapes = [draw(rng, i, random.Random(f"wide:{seed}:{i}") if wide else None) for i in range(count)]
    return [d for d in shapes if prefixes is None or d[0].name.startswith(prefixes)]


def with_available(dsn: str, schema: str, shape: Shape, share: float, per_claim: bool) -> Shape:
    """``shape`` with its amount set from the seeded sizes: the ``share`` quantile (per claim: a range)."""
    with psycopg.connect(dsn) as conn:
        conn.execute(f'SET search_path = "{schema}"')
        row = conn.execute("SELECT percentile_disc(%s) WITHIN GROUP (ORDER BY required),"
                           " percentile_disc(%s) WITHIN GROUP (ORDER BY required) FROM tasks",
                           (share, WIDE_LOW_SHARE)).fetchone()
    assert row is not None
    available: int | tuple[int, int] = (int(row[1]), int(row[0])) if per_claim else int(row[0])
    return dataclasses.replace(shape, available=available)


def measure(dsn: str, shape: Shape, share: float, rows: int, seconds: float,
            per_claim: bool = False, clients: int = 1) -> dict[str, Any]:
    common.console.log(f"random_shapes: {shape.name}: seeding {rows:,} rows")
    S.seed(dsn, S.SCHEMA, shape, rows)
    shape = with_available(dsn, S.SCHEMA, shape, share, per_claim)
    args = {"dsn": dsn, "schema": S.SCHEMA, "shape": shape, "cap": max(1, rows // 4 // clients)}
    naive = S.naive_phase(dsn, shape, clients, args, seconds)
    ours, lat = S.phase(S.ours_client, clients, args, f"{shape.name} ours x{clients}", seconds)
    S.reset(dsn, S.SCHEMA)
    result = {"shape": shape.name, "clients": clients, "available": shape.available, "fit_share": share,
              "naive_per_s": naive,
              "ours_per_s": ours, "ratio": common.ratio(ours, naive) if naive else None,
              "ours_claim": common.latency_summary(lat)}
    if not naive and isinstance(shape.available, int):
        result["empty_claims"] = empty_claims(dsn, shape)
        S.reset(dsn, S.SCHEMA)
    return result


def empty_claims(dsn: str, shape: Shape) -> dict[str, Any]:
    """Nothing to claim: ``EMPTY_CLAIMS`` of ours in a row, each timed, and the fits left unparked after each.

    Against them, one naive query, which walks every fit to find that none
    may run. A worker polls this way while its queue holds only work it may
    not start yet, so what matters is how soon an empty claim gets cheap.
    """
    from taskqueue import TaskQueue

    assert isinstance(shape.available, int)
    count_fits = ("SELECT count(*) FILTER (WHERE NOT parked), count(*) FROM tasks"
                  " WHERE state = 'queued' AND required <= %s AND (%s::text[] IS NULL OR queue = ANY (%s))")
    common.execute(dsn, S.SCHEMA, shape.naive_index, "ANALYZE tasks")
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f'SET search_path = "{S.SCHEMA}"')
        t0 = time.perf_counter()
        found = conn.execute(shape.naive_sql(), shape.naive_params(shape.available)).fetchone()
        naive_ms = (time.perf_counter() - t0) * 1000
        if found is not None:
            raise RuntimeError(f"{shape.name}: the naive query found {found} in a shape with nothing to claim")
        conn.execute("DROP INDEX bench_naive")
        tq = TaskQueue(dsn, schema=S.SCHEMA)
        claims, unparked, fits = [], [], 0
        with common.progress() as bar:
            progress = bar.add_task(f"{shape.name}: empty claims", total=EMPTY_CLAIMS)
            for _ in range(EMPTY_CLAIMS):
                t0 = time.perf_counter()
                task = tq.claim(available=shape.available, worker="empty",
                                order=shape.order, queues=shape.queue_list)
                claims.append((time.perf_counter() - t0) * 1000)
                if task is not None:
                    raise RuntimeError(f"{shape.name}: a claim took {task!r} where the naive query found nothing")
                row = conn.execute(count_fits, (shape.available, shape.queue_list, shape.queue_list)).fetchone()
                assert row is not None
                unparked.append(row[0])
                fits = row[1]
                bar.advance(progress)
        tq.close()
    return {"naive_ms": naive_ms, "claims_ms": claims, "fits": fits, "fits_unparked_after": unparked,
            "first_ms": claims[0], "last_10_median_ms": sorted(claims[-10:])[5],
            "claims_until_all_parked": next((i + 1 for i, u in enumerate(unparked) if u == 0), None)}


def run(opts: common.Options) -> dict[str, Any]:
    rows = opts.rows or DEFAULT_ROWS
    seconds = opts.seconds or 3.0
    count = opts.count or DEFAULT_COUNT
    clients = opts.clients or 1
    if clients < 1:
        raise SystemExit("--clients must be at least 1")
    seed = opts.seed if opts.seed is not None else 1
    results = [measure(opts.dsn, shape, share, rows, seconds, per_claim, clients)
               for shape, share, per_claim in drawn(seed, count, opts.wide, opts.only)]
    common.drop_schema(opts.dsn, S.SCHEMA)
    ratios = [r["ratio"] for r in results if r["ratio"] is not None]
    return {
        "scenario": "random_shapes", "rows": rows, "seconds_per_phase": seconds, "count": count, "seed": seed,
        "wide": opts.wide, "clients": clients,
        "shapes": results,
        "min_ratio": min(ratios) if ratios else None,
        "below_0_8": [r["shape"] for r in results if r["ratio"] is not None and r["ratio"] < 0.8],
        # A shape where nothing fits at all (every fit in a full pool): both sides stop at their first claim.
        "nothing_claimable": [r["shape"] for r in results if r["ratio"] is None],
    }


def table(result: dict[str, Any]) -> str:
    """The markdown table of docs/performance.md, from a ``random_shapes`` result."""
    x = f"x{result.get('clients', 1)}"
    lines = [f"| shape | available | naive {x} | ours {x} | ratio | ours p99 |", "|---|---|---|---|---|---|"]
    for s in sorted(result["shapes"], key=lambda s: s["ratio"] if s["ratio"] is not None else -1):
        ratio = "-" if s["ratio"] is None else f"{s['ratio']:.2f}x"
        available = s["available"]
        amount = f"{available[0]:,}..{available[1]:,}" if isinstance(available, (list, tuple)) else f"{available:,}"
        lines.append(f"| {s['shape']} | {amount} | {s['naive_per_s']:,.1f}/s | {s['ours_per_s']:,.1f}/s | "
                     f"{ratio} | {s['ours_claim']['p99_ms']:.2f} ms |")
    return "\n".join(lines)
