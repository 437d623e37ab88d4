"""How often step K runs when 8 consumers race for the same tasks (issue #9, migration 0047).

Step K (claim_tasks v33 and later) walks past fits that other transactions hold, once
a claim has lost 8 of them. A claim among consumers that only hold rows for
a claim + complete rarely loses that many, so K should not change the
shapes' figures. This scenario checks that by counting: each chosen shape
of ``bench shapes`` is seeded (``--rows``, default 200,000), the schema's
claim_tasks is replaced by a copy of the shipped file that bumps a sequence
each time step K runs (nothing else differs), and 8 consumers claim and
complete for ``--seconds`` (default 8) as ``bench shapes`` runs them. The
shipped function is never changed: the copy lives in the scenario's own
schema, dropped at the end.

``python -m bench k_walks [--only deadlines,mb_half] [--rows N] [--seconds S]``
"""

from __future__ import annotations

from typing import Any

from . import common, shapes
from .instructions import newest_claim_tasks
from .shape_catalog import chosen

SCHEMA = "bench_k_walks"
DEFAULT = ("one_size", "mb_half", "deadlines", "deadlines_max", "listed_deadlines", "queues_half")
MARK = "                -- K (version 33). Fits keep turning out locked by other\n"


def counting_claim() -> str:
    """The newest shipped claim_tasks with a sequence bumped where step K starts (its first comment line)."""
    src = newest_claim_tasks().read_text()
    if src.count(MARK) != 1:
        raise RuntimeError("k_walks: step K's first line is not where this scenario expects it")
    return src.replace(MARK, "                PERFORM nextval('k_walks');\n" + MARK)


def run(opts: common.Options) -> dict[str, Any]:
    rows = opts.rows or 200_000
    seconds = opts.seconds or 8.0
    out: dict[str, Any] = {}
    for shape in chosen(opts.only, DEFAULT, "k_walks"):
        name = shape.name
        shapes.seed(opts.dsn, SCHEMA, shape, rows)
        common.execute(opts.dsn, SCHEMA, "CREATE SEQUENCE k_walks", counting_claim())
        args = {"dsn": opts.dsn, "schema": SCHEMA, "shape": shape, "cap": rows}
        elapsed, _, count = common.run_clients(
            shapes.ours_client, 8, args, label=f"{name}: 8 consumers, step K counted", total=seconds,
            seconds=seconds)
        walks = int(common.scalar(opts.dsn, SCHEMA,
                                  "SELECT CASE WHEN is_called THEN last_value ELSE 0 END FROM k_walks"))
        out[name] = {"claims": count, "claims_per_s": count / elapsed, "k_walks": walks,
                     "k_walks_per_claim": walks / count if count else None}
        common.drop_schema(opts.dsn, SCHEMA)
    return {"scenario": "k_walks", "rows": rows, "seconds": seconds, "consumers": 8, "shapes": out}
