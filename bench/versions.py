"""Two versions of a claim function side by side on the same shape: ``python -m bench versions``.

A change to ``claim_tasks`` is judged against the version it replaces, not
against a figure from another day: the shape is seeded twice, the older
function file (``--old``, e.g. ``claim_tasks.v10``; several, comma-separated,
are loaded in that order) is loaded into one copy, and the two are measured
in interleaved rounds, 1 and 8 consumers each, so a slow spell of the
machine falls on both. The result is new / old per
round and the median of the rounds, in tasks claimed and completed a
second. With ``--limit N`` each consumer claims with ``claim_many(limit=N)``
and finishes the batch with one ``complete_many``.

``--seed S --only r1,r11`` measures shapes of a random draw (``bench
random_shapes``, same ``--count`` and ``--wide``), named by prefix, with the
amount each gets there.

An index a version changed is named the same way: ``ix_tasks_fit_fine.v1``
(the fine index before migration 0043) rebuilds it in the older copy as it
was, so ``--old ix_tasks_fit_fine.v1,fit_candidate.v10`` measures version 10
on its own index. A function whose signature a later version changed is
dropped the same way before its older file loads: ``--old
park_rows.v8.none,park_rows.v6,claim_tasks.v41`` is the code of migration
0056.
"""

from __future__ import annotations

import statistics
from typing import Any

import psycopg

from . import common, random_shapes, shape_catalog, shapes

OLD_SCHEMA = "bench_versions_old"
NEW_SCHEMA = "bench_versions_new"
ROUNDS = 3


#: ix_tasks_fit_fine's columns and predicate from migration 0007 to 0042 (bench/enqueue.py measures it too).
FINE_V1 = "(queue, required_fine(required), priority, id) WHERE state = 'queued' AND NOT parked"
#: Earlier definitions of indexes that a migration changed, by name.version (and functions to drop).
OLD_INDEXES = {
    "ix_tasks_fit_fine.v1": ("DROP INDEX ix_tasks_fit_fine", f"CREATE INDEX ix_tasks_fit_fine ON tasks {FINE_V1}"),
    # Before migration 0053: no index of every queue's fits by size, and the small tasks' own.
    "ix_tasks_fit_any_exact.none": ("DROP INDEX ix_tasks_fit_any_exact",),
    "ix_tasks_fit_small_any.v1": ("CREATE INDEX ix_tasks_fit_small_any ON tasks (bucket, priority, id) "
                                  "WHERE state = 'queued' AND NOT parked AND id > 0 AND bucket < 16",),
    # park_rows gained a parameter with a default in migrations 0057 and 0059: its signature of today is
    # dropped first, or a call from an older claim_tasks would be ambiguous between the two (--old
    # park_rows.v8.none,park_rows.v7,claim_tasks.v43: the code of migration 0058;
    # park_rows.v8.none,park_rows.v6,claim_tasks.v41: of migration 0056).
    "park_rows.v8.none": ("DROP FUNCTION park_rows(bigint[], text[], boolean, bigint, boolean, boolean)",),
}


def load_old(dsn: str, schema: str, name: str) -> None:
    """Load the function file ``name`` into ``schema`` (the schema's own search path, as a migration runs it),
    or rebuild an index as it was (OLD_INDEXES)."""
    import sqlalchemy as sa

    if name in OLD_INDEXES:
        common.execute(dsn, schema, *OLD_INDEXES[name], "ANALYZE tasks")
        return

    from taskqueue.migrate import functions_dir, load_sql_objects

    if not (functions_dir() / f"{name}.sql").is_file():
        raise SystemExit(f"versions: no function file {name}.sql under migrations/functions")
    engine = sa.create_engine("postgresql+psycopg://", creator=lambda: psycopg.connect(dsn))
    try:
        with engine.begin() as conn:
            conn.exec_driver_sql("SELECT set_config('search_path', %s, true)", (f'"{schema}"',))
            load_sql_objects(conn, name)
    finally:
        engine.dispose()


def measure(dsn: str, shape: shape_catalog.Shape, rows: int, seconds: float, old: str,
            limit: int = 1, drawn: tuple[float, bool] | None = None) -> dict[str, Any]:
    """``drawn``: a random shape's fit share and whether its amount is drawn per claim (its amount is
    set from the seeded sizes, as ``random_shapes`` sets it)."""
    for schema in (OLD_SCHEMA, NEW_SCHEMA):
        common.console.log(f"versions: {shape.name}: seeding {rows:,} rows into {schema}")
        shapes.seed(dsn, schema, shape, rows)
    if drawn is not None:
        shape = random_shapes.with_available(dsn, NEW_SCHEMA, shape, *drawn)
    for name in old.split(","):  # e.g. "fit_candidate.v7,claim_tasks.v19": loaded in that order
        load_old(dsn, OLD_SCHEMA, name.strip())
    cap = max(1, rows // 4 // shapes.CLIENTS // ROUNDS)
    rounds: dict[str, list[dict[str, float]]] = {"x1": [], f"x{shapes.CLIENTS}": []}
    for r in range(ROUNDS):
        for clients in (1, shapes.CLIENTS):
            got: dict[str, float] = {}
            # Alternate which goes first, so neither always gets the warmer cache.
            order = (OLD_SCHEMA, NEW_SCHEMA) if r % 2 == 0 else (NEW_SCHEMA, OLD_SCHEMA)
            for schema in order:
                args = {"dsn": dsn, "schema": schema, "shape": shape, "cap": cap, "limit": limit}
                label = f"{shape.name} {'old' if schema == OLD_SCHEMA else 'new'} x{clients} round {r + 1}"
                got[schema], _ = shapes.phase(shapes.ours_client, clients, args, label, seconds)
                shapes.reset(dsn, schema)
            rounds[f"x{clients}"].append({"old_per_s": got[OLD_SCHEMA], "new_per_s": got[NEW_SCHEMA],
                                          "new_over_old": common.ratio(got[NEW_SCHEMA], got[OLD_SCHEMA])})
    out: dict[str, Any] = {"shape": shape.name, "rows": rows, "old": old, "limit": limit, "rounds": rounds}
    for key, values in rounds.items():
        out[key] = statistics.median(v["new_over_old"] for v in values)
    return out


def run(opts: common.Options) -> dict[str, Any]:
    if not opts.old:
        raise SystemExit("versions: name the older function file with --old, e.g. --old claim_tasks.v10")
    wanted = set(opts.only.split(",")) if opts.only else None
    picked: list[tuple[shape_catalog.Shape, tuple[float, bool] | None]]
    if opts.seed is not None:
        # Shapes of a random draw (--seed, --count, --wide as random_shapes takes them; --only by prefix).
        if wanted is None:
            raise SystemExit("versions: with --seed, name the drawn shapes with --only, e.g. --only r1,r11")
        found = random_shapes.drawn(opts.seed, opts.count or random_shapes.DEFAULT_COUNT, opts.wide, opts.only)
        missing = sorted(p for p in wanted if not any(s.name.startswith(f"{p}_") for s, _, _ in found))
        if missing:
            raise SystemExit(f"versions: no shape of draw {opts.seed} is named {', '.join(missing)}")
        picked = [(shape, (share, per_claim)) for shape, share, per_claim in found]
    else:
        picked = [(s, None) for s in shape_catalog.SHAPES if wanted is None or s.name in wanted]
        unknown = (wanted or set()) - {s.name for s in shape_catalog.SHAPES}
        if unknown:
            raise SystemExit(f"versions: unknown shape(s): {', '.join(sorted(unknown))}")
    rows = opts.rows or shapes.DEFAULT_ROWS
    seconds = opts.seconds or 5.0
    try:
        if opts.limit is not None and not 1 <= opts.limit <= 100_000:
            raise SystemExit("versions: --limit must be between 1 and 100000")
        results = [measure(opts.dsn, s, rows, seconds, opts.old, opts.limit or 1, d) for s, d in picked]
    finally:
        for schema in (OLD_SCHEMA, NEW_SCHEMA):
            common.drop_schema(opts.dsn, schema)
    return {"scenario": "versions", "rows": rows, "seconds_per_phase": seconds, "rounds": ROUNDS,
            "clients": shapes.CLIENTS, "old": opts.old, "limit": opts.limit or 1, "shapes": results}


def table(result: dict[str, Any]) -> str:
    """Markdown: new / old per shape, median of the rounds and each round."""
    n = result["clients"]
    lines = [f"| shape | new / old x1 | new / old x{n} | rounds x1 | rounds x{n} |", "|---|---|---|---|---|"]
    for s in result["shapes"]:
        each = {k: " ".join(f"{v['new_over_old']:.2f}" for v in s["rounds"][k]) for k in s["rounds"]}
        lines.append(f"| {s['shape']} | {s['x1']:.2f}× | {s[f'x{n}']:.2f}× | {each['x1']} | {each[f'x{n}']} |")
    return "\n".join(lines)
