"""Target 4: enqueue speed.

``enqueue_many`` in 10k-task batches (target: 100k tasks/s) against plain COPY
into the same table; single ``enqueue`` against a bare single-row
INSERT + COMMIT into the same table (target: 80%); the peers' batch and
single enqueue through their own APIs; all in one run, one client.
``--only index_cost``: enqueue_many with and without the descending claim
index (migration 0030), alternating rounds. ``--only level_index_cost``: the
same for five fit-level indexes without the queue column, which the schema
does not have (what they would cost every enqueue). ``--only fine_include_cost``:
ix_tasks_fit_fine as migration 0043 made it (carrying required and pool)
against the index it replaced, alternating rounds. ``--only any_exact_cost``:
ix_tasks_fit_any_exact in place of ix_tasks_fit_small_any (migration 0053)
against the two as they were, alternating rounds.
"""

from __future__ import annotations

import random
import statistics
import time
from collections.abc import Mapping
from typing import Any

import psycopg

from . import common, peers, versions

DEFAULT_ROWS = 200_000
BATCH = 10_000
SINGLES = 2_000
SCHEMA = "bench_enqueue"


def _copy(dsn: str, n: int) -> float:
    with psycopg.connect(dsn) as conn:
        conn.execute("SELECT set_config('search_path', %s, false)", (f'"{SCHEMA}"',))
        t0 = time.perf_counter()
        done = 0
        while done < n:
            k = min(BATCH, n - done)
            with conn.cursor().copy(
                "COPY tasks (queue, payload, priority, required, state, max_attempts) FROM STDIN"
            ) as cp:
                for _ in range(k):
                    cp.write_row(("default", "null", 0, 0, "queued", 3))
            conn.commit()
            done += k
        return time.perf_counter() - t0


def _bare_inserts(dsn: str, n: int) -> float:
    with psycopg.connect(dsn) as conn:
        conn.execute("SELECT set_config('search_path', %s, false)", (f'"{SCHEMA}"',))
        conn.commit()
        t0 = time.perf_counter()
        for _ in range(n):
            conn.execute(
                "INSERT INTO tasks (queue, payload, priority, required, state, max_attempts)"
                " VALUES (%s, %s, 0, 0, 'queued', 3)",
                ("default", "null"),
                prepare=True,
            )
            conn.commit()
        return time.perf_counter() - t0


def _timed_enqueue_many(tq: Any, specs: list[dict[str, Any]], n: int, bar: Any, label: str) -> float:
    """Seconds to enqueue ``n`` tasks in batches of BATCH, after a small warm-up batch."""
    tq.enqueue_many(specs[:100])  # warm up the pool and the statement
    t = bar.add_task(label, total=n)
    t0 = time.perf_counter()
    done = 0
    while done < n:
        k = min(BATCH, n - done)
        tq.enqueue_many(specs[:k])
        done += k
        bar.update(t, completed=done)
    return time.perf_counter() - t0


#: ``--only index_cost``: enqueue_many with and without ix_tasks_claim_desc
#: (migration 0030), alternating, so both see the same disk and the same table growth.
INDEX_ROUNDS = 3
CLAIMABLE_ANY = "WHERE state = 'queued' AND NOT parked AND id > 0"
DESC_INDEXES = {"ix_tasks_claim_desc": f"(priority DESC, id) {CLAIMABLE_ANY}"}
#: ``--only level_index_cost``: what the fit levels without the queue column would cost
#: every enqueue. A claim over every queue asks each queue's levels today, because the
#: level indexes lead with the queue (docs/performance.md, issue 9); these five would let
#: it ask them once. Not part of the schema: measured to decide, and left out.
LEVEL_INDEXES = {
    "ix_bench_any_class": f"(required_class(required), priority, id) {CLAIMABLE_ANY}",
    "ix_bench_any_bucket": f"(bucket, priority, id) {CLAIMABLE_ANY}",
    "ix_bench_any_mid": f"(required_mid(required), priority, id) {CLAIMABLE_ANY}",
    "ix_bench_any_fine": f"(required_fine(required), priority, id) {CLAIMABLE_ANY}",
    "ix_bench_any_exact": f"(required, priority, id) {CLAIMABLE_ANY}",
}

#: ``--only any_exact_cost``: the indexes as migration 0053 left them (ix_tasks_fit_any_exact, every
#: queue's fits in one range, in place of ix_tasks_fit_small_any) against those before it.
ANY_EXACT: dict[str, str | None] = {"ix_tasks_fit_any_exact": f"(required, priority, id) {CLAIMABLE_ANY}",
                                    "ix_tasks_fit_small_any": None}
SMALL_ANY = {"ix_tasks_fit_small_any": f"(bucket, priority, id) {CLAIMABLE_ANY} AND bucket < 16"}

#: ``--only fine_include_cost``: the fine index with INCLUDE (required, pool) (migration 0043)
#: against its definition before, the "without" side.
FINE_INCLUDE = {"ix_tasks_fit_fine": "(queue, required_fine(required), priority, id) INCLUDE (required, pool) "
                                      "WHERE state = 'queued' AND NOT parked AND lease_token IS NULL"}
FINE_BEFORE = {"ix_tasks_fit_fine": versions.FINE_V1}


def _set_indexes(dsn: str, indexes: Mapping[str, str | None], present: bool,
                 instead: dict[str, str] | None = None) -> None:
    """The "with" side (present) builds each definition (None: the index is absent there); the
    "without" side builds ``instead``'s, where it names one."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("SELECT set_config('search_path', %s, false)", (f'"{SCHEMA}"',))
        conn.execute("TRUNCATE tasks CASCADE")
        for name, definition in indexes.items():
            conn.execute(f"DROP INDEX IF EXISTS {name}")
            if present and definition is not None:
                conn.execute(f"CREATE INDEX {name} ON tasks {definition}")
            elif instead and name in instead:
                conn.execute(f"CREATE INDEX {name} ON tasks {instead[name]}")


def index_cost(opts: common.Options, indexes: Mapping[str, str | None], kinds: dict[str, list[dict[str, Any]]],
               instead: dict[str, str] | None = None) -> dict[str, Any]:
    """enqueue_many's rate with ``indexes`` and without them (or with ``instead``'s definitions of
    the same names), for each kind of batch, in alternating rounds."""
    n = opts.rows or DEFAULT_ROWS
    tq = common.fresh_queue(opts.dsn, SCHEMA)
    result: dict[str, Any] = {"scenario": "enqueue", "only": opts.only, "rows": n, "batch": BATCH,
                              "indexes": sorted(indexes)}
    with common.progress() as bar:
        for kind, specs in kinds.items():
            rates: dict[str, list[float]] = {"with": [], "without": []}
            for r in range(INDEX_ROUNDS):
                for side in (("with", "without") if r % 2 == 0 else ("without", "with")):
                    _set_indexes(opts.dsn, indexes, side == "with", instead)
                    seconds = _timed_enqueue_many(tq, specs, n, bar, f"{kind}, {side} the indexes, round {r + 1}")
                    rates[side].append(n / seconds)
            with_, without = statistics.median(rates["with"]), statistics.median(rates["without"])
            result[kind] = {"rounds": rates, "with_per_second": with_, "without_per_second": without,
                            "ratio": with_ / without}
    tq.close()
    common.drop_schema(opts.dsn, SCHEMA)
    return result


def _mixed_batch(pools: bool = False) -> list[dict[str, Any]]:
    """Tasks as a mixed fleet enqueues them: 100 queues, 1,000 priorities, sizes 1..1M (seeded);
    with ``pools``, each in one of 200 pools named as /24 networks."""
    rng = random.Random(20261126)
    return [{"payload": None, "queue": f"q{rng.randrange(100)}", "priority": rng.randrange(1000),
             "required": rng.randint(1, 1_000_000),
             **({"pool": f"10.0.{rng.randrange(200)}.0/24"} if pools else {})} for _ in range(BATCH)]


def run(opts: common.Options) -> dict[str, Any]:
    if opts.only == "index_cost":
        return index_cost(opts, DESC_INDEXES, {
            "one_priority": [{"payload": None}] * BATCH,
            "spread_priorities": [{"payload": None, "priority": i % 1000} for i in range(BATCH)]})
    if opts.only == "level_index_cost":
        return index_cost(opts, LEVEL_INDEXES, {"one_size": [{"payload": None}] * BATCH, "mixed": _mixed_batch()})
    if opts.only == "any_exact_cost":
        return index_cost(opts, ANY_EXACT, {"one_size": [{"payload": None}] * BATCH, "mixed": _mixed_batch()},
                          instead=SMALL_ANY)
    if opts.only == "fine_include_cost":
        return index_cost(opts, FINE_INCLUDE, {"one_size": [{"payload": None}] * BATCH,
                                               "mixed_pools": _mixed_batch(pools=True)}, instead=FINE_BEFORE)
    n = opts.rows or DEFAULT_ROWS
    singles = min(SINGLES, n)
    dsn = opts.dsn
    tq = common.fresh_queue(dsn, SCHEMA)
    specs = [{"payload": None}] * BATCH
    with common.progress() as bar:
        many = _timed_enqueue_many(tq, specs, n, bar, "enqueue_many")
        t = bar.add_task("COPY", total=1)
        copy = _copy(dsn, n)
        bar.update(t, completed=1)
        t = bar.add_task("enqueue x1", total=singles)
        t0 = time.perf_counter()
        for i in range(singles):
            tq.enqueue(None)
            if i % 100 == 0:
                bar.update(t, completed=i)
        single = time.perf_counter() - t0
        bar.update(t, completed=singles)
        t = bar.add_task("bare INSERT+COMMIT", total=1)
        bare = _bare_inserts(dsn, singles)
        bar.update(t, completed=1)
    tq.close()
    common.drop_schema(dsn, SCHEMA)
    result: dict[str, Any] = {
        "scenario": "enqueue",
        "rows": n,
        "batch": BATCH,
        "enqueue_many_per_second": n / many,
        "copy_per_second": n / copy,
        "enqueue_single_per_second": singles / single,
        "bare_insert_commit_per_second": singles / bare,
    }
    versions = peers.available()
    if versions["pgqueuer"]:
        pdsn = peers.pgq_dsn(dsn)
        peers.pgq_reset(pdsn)
        result["pgqueuer_batch_per_second"] = n / peers.pgq_enqueue(pdsn, n, BATCH)
        result["pgqueuer_single_per_second"] = singles / peers.pgq_enqueue(pdsn, singles, 1)
    if versions["procrastinate"]:
        rdsn = peers.proc_dsn(dsn)
        peers.proc_reset(rdsn)
        result["procrastinate_batch_per_second"] = n / peers.proc_enqueue(rdsn, n, BATCH)
        result["procrastinate_single_per_second"] = singles / peers.proc_enqueue(rdsn, singles, 1)
    limit = common.physical_limit(dsn, 1)
    result["limit"] = limit
    result["ratios"] = {
        "enqueue_many_vs_copy": common.ratio(result["enqueue_many_per_second"], result["copy_per_second"]),
        "single_vs_bare_insert": common.ratio(result["enqueue_single_per_second"], result["bare_insert_commit_per_second"]),
        "enqueue_many_vs_limit": common.ratio(result["enqueue_many_per_second"], limit["per_second"]),
        "single_vs_limit": common.ratio(result["enqueue_single_per_second"], limit["per_second"]),
    }
    result["targets"] = {
        "enqueue_many_ge_100k": result["enqueue_many_per_second"] >= 100_000,
        "single_ge_0_8_bare": result["ratios"]["single_vs_bare_insert"] >= 0.8,
    }
    return result
