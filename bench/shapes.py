"""The fit claim on adversarial shapes of data, against the naive query (issue #9).

Every shape is a backlog of N queued tasks, built to hurt some design: many
distinct sizes (MB), many distinct priorities (deadlines), both, sizes that
fall or rise with id, tasks sized just above what is available, a few huge
levels, pools of which half are full, ``order="max"``, 1,000 queues
claimed from all at once, 40 queues of which a consumer lists 20, or 1,000
of which it lists 200 (the others use one queue), and sizes in bytes packed within 0.2% of what is
available on both sides, so that every task falls in the claim's boundary
bucket (``bytes_boundary``).

Each shape is measured side by side in one run:
- **naive**: bare SQL through psycopg (``WHERE state = 'queued' AND required
  <= A ORDER BY priority, id FOR UPDATE SKIP LOCKED LIMIT 1`` over its own
  ``(priority, id)`` index), then the same task marked done, each its own
  transaction. With pools it also skips full pools (NOT EXISTS), so it does
  what ours does.
- **naive on a lean copy** (since 2026-12-01): the same naive loop on a copy
  of the same rows that has their primary key and the naive index and
  nothing else, which is the issue's own reference. On the queue's table
  the naive query's two writes a task pay for its 16 indexes and five CHECK
  constraints as ours do; on the copy they do not (``ratio_lean``,
  ``met_lean``).
- **ours**: ``TaskQueue.claim(available=A)`` + ``complete()``.
- **by id**: the same two writes with the search taken away: each client
  reads the ids the naive query would take, in its order, before the clock
  starts, then claims and completes each by id. No claim can beat this on
  the same server; it is the ceiling set by commits and WAL (on hard shapes
  each task sits on its own heap page, so each write brings a full-page
  image after a checkpoint).
All three with 1 and with 8 consumer processes; then ours' claim p99 at a 10k
backlog of the same shape against the full one, their claims interleaved
(so both see the same disk), and ``claim_many(limit=100)`` per task claimed.
Claimed rows are put back between phases. With 8 consumers, the three sides
run 3 interleaved phases each and each side's figure is the median (ROUNDS).

The shapes and their SQL are in ``shape_catalog``; the tables of
docs/performance.md are drawn by ``shape_tables``.
"""

from __future__ import annotations

import contextlib
import random
import statistics
import time
from collections.abc import Iterator
from typing import Any

import psycopg

from . import common
from .shape_catalog import (
    BY_ID_CLAIM,
    LEAN_TABLE,
    NAIVE_DONE,
    POOLS,
    RESET,
    SEED,
    SHAPES,
    Shape,
    on_table,
)

DEFAULT_ROWS = 1_000_000
SMALL_ROWS = 10_000
CLIENTS = 8
SCHEMA = "bench_shapes"
SMALL_SCHEMA = "bench_shapes_small"
#: Timed phases of naive, naive on the lean copy and ours per consumer count,
#: interleaved (naive first in odd rounds, ours first in even ones, the lean
#: copy between them); each side's figure is its median.
#: Eight consumers on two cores move by a fifth from one 5 s phase to the
#: next (one_size, same code: 0.64 to 0.96 of the naive query), one consumer
#: far less.
ROUNDS = {1: 1, CLIENTS: 3}
#: claim_many(limit=100) calls a side for its growth, in blocks with the claimed rows put back between them.
BATCH_CALLS = 100
BATCH_BLOCKS = 5


def seed(dsn: str, schema: str, shape: Shape, rows: int) -> None:
    common.fresh_queue(dsn, schema).close()
    sql = SEED.format(priority=shape.priority, required=shape.required, npools=POOLS, queues=shape.queues)
    statements: list[str | tuple[str, Any]] = [(sql, {"n": rows, "pools": shape.pools})]
    if shape.pools:
        statements.append(("INSERT INTO pools (name, running_limit) SELECT 'p' || g, CASE WHEN g %% 2 = 0 THEN 0 END "
                           "FROM generate_series(0, %s) g ON CONFLICT (name) DO UPDATE SET running_limit = "
                           "excluded.running_limit", (POOLS - 1,)))
    statements.append("VACUUM ANALYZE tasks")
    common.execute(dsn, schema, *statements)


def reset(dsn: str, schema: str, checkpoint: bool = True, table: str = "tasks") -> None:
    """Claimed rows put back, and a checkpoint, so each phase starts with the same full-page writes ahead of it.

    ``table``: the queue's, or the lean copy (``LEAN_TABLE``) after its phase.
    """
    common.execute(dsn, schema, on_table(RESET, table), "UPDATE pools SET running = 0", f"VACUUM ANALYZE {table}",
                   *(("CHECKPOINT",) if checkpoint else ()))


def draw_available(shape: Shape, rng: random.Random) -> int:
    if isinstance(shape.available, tuple):
        return rng.randint(*shape.available)
    return shape.available


def connect(args: dict[str, Any]) -> psycopg.Connection[Any]:
    """A bare psycopg connection on the shape's schema (the naive and by-id clients)."""
    conn = psycopg.connect(args["dsn"])
    conn.execute("SELECT set_config('search_path', %s, false)", (f'"{args["schema"]}"',))
    conn.commit()
    return conn


#: With an amount drawn per claim, a claim may find nothing for its amount (every fit of that size in a
#: full pool, say) while other amounts still fit: the client draws again, and stops only after this many
#: empty claims in a row. Both sides pay for their empty claims on the clock; only tasks taken count.
#: (Before 2026-11-30 the first empty claim stopped the client, so such a phase ended at the first small
#: amount, and ours' one claim that parks the full pools' fits in bulk was most of it: the wide draw's w22
#: of seed 7 read 0.29x for that.)
EMPTY_IN_A_ROW = 50


def _stop_on_empty(shape: Shape, empty_run: int) -> bool:
    return not isinstance(shape.available, tuple) or empty_run >= EMPTY_IN_A_ROW


def naive_client(idx: int, args: dict[str, Any], counter: Any, sync: Any) -> dict[str, Any]:
    shape: Shape = args["shape"]
    table = args.get("table", "tasks")
    sql = shape.naive_sql(table)
    done = on_table(NAIVE_DONE, table)
    rng = random.Random(idx)
    with connect(args) as conn:
        stop = common.ready(counter, sync)
        n = empty = run = 0
        while not stop.is_set() and n < args["cap"]:
            row = conn.execute(sql, shape.naive_params(draw_available(shape, rng))).fetchone()
            conn.commit()
            if row is None:
                empty, run = empty + 1, run + 1
                if _stop_on_empty(shape, run):
                    break
                continue
            run = 0
            conn.execute(done, (row[0],))
            conn.commit()
            n += 1
            counter.value = n
    return {"count": n, "empty": empty}


def _by_id_client(idx: int, args: dict[str, Any], counter: Any, sync: Any) -> dict[str, Any]:
    """The ceiling: the rows the naive query would take, claimed and completed by id, no search on the clock."""
    shape: Shape = args["shape"]
    a = shape.available[1] if isinstance(shape.available, tuple) else shape.available
    with connect(args) as conn:
        params = {**shape.naive_params(a), "clients": args["clients"], "idx": idx, "cap": args["cap"]}
        ids = [r[0] for r in conn.execute(shape.by_id_sql(), params)]
        conn.commit()
        stop = common.ready(counter, sync)
        n = 0
        for task_id in ids:
            if stop.is_set():
                break
            conn.execute(BY_ID_CLAIM, (task_id,), prepare=True)
            conn.commit()
            conn.execute(NAIVE_DONE, (task_id,), prepare=True)
            conn.commit()
            n += 1
            counter.value = n
    return {"count": n}


def ours_client(idx: int, args: dict[str, Any], counter: Any, sync: Any) -> dict[str, Any]:
    from taskqueue import TaskQueue

    shape: Shape = args["shape"]
    rng = random.Random(idx)
    # The defaults, as a user's: one thread opens one connection, held for its one-statement calls.
    tq = TaskQueue(args["dsn"], schema=args["schema"])
    tq.peek(available=1)
    stop = common.ready(counter, sync)
    n, lat, empty, run = 0, [], 0, 0
    limit = args.get("limit") or 1  # above 1: claim_many and one complete_many (bench versions --limit)
    while not stop.is_set() and n < args["cap"]:
        a = draw_available(shape, rng)
        t0 = time.perf_counter()
        if limit > 1:
            got = tq.claim_many(available=a, limit=limit, worker=f"ours-{idx}", order=shape.order,  # type: ignore[arg-type]
                                queues=shape.queue_list)
        else:
            task = tq.claim(available=a, worker=f"ours-{idx}", order=shape.order,  # type: ignore[arg-type]
                            queues=shape.queue_list)
            got = [] if task is None else [task]
        lat.append(time.perf_counter() - t0)
        if not got:
            empty, run = empty + 1, run + 1
            if _stop_on_empty(shape, run):
                break
            continue
        run = 0
        if a is not None and sum(t.required for t in got) > a:
            raise RuntimeError(f"claimed {got!r} with available={a}")
        if limit > 1:
            tq.complete_many([(t, None) for t in got])
        else:
            tq.complete(got[0])
        n += len(got)
        counter.value = n
    tq.close()
    return {"count": n, "lat": lat, "empty": empty}


def phase(fn: Any, clients: int, args: dict[str, Any], label: str, seconds: float) -> tuple[float, list[float]]:
    elapsed, res, count = common.run_clients(fn, clients, args, label=label, total=seconds, seconds=seconds)
    return count / elapsed, [x for r in res for x in r.get("lat", [])]


def claim_latency(dsn: str, schemas: tuple[str, str], shape: Shape, samples: int,
                  limit: int = 1, blocks: int = 1) -> tuple[dict[str, float], dict[str, float]]:
    """One consumer per backlog, their claims interleaved: ``samples`` claims (or claim_many of ``limit``) each.

    The two backlogs (10k and the full one) are measured turn by turn in one
    loop, so a slow spell of the disk (each claim commits, with an fsync)
    falls on both alike; claimed rows are put back afterwards. With
    ``blocks``, the samples come in that many blocks with the claimed rows
    put back between them, so a batch claim can be sampled often enough for
    a p99 without emptying the 10k backlog.
    """
    from taskqueue import TaskQueue

    rng = random.Random(7)
    lat: tuple[list[float], list[float]] = ([], [])
    queues = [TaskQueue(dsn, schema=schema, pool_size=1) for schema in schemas]
    try:
        for tq in queues:
            tq.peek(available=1)
        done = [False, False]
        block = max(1, samples // blocks)
        for sample in range(samples):
            new_block = sample > 0 and blocks > 1 and sample % block == 0
            if new_block:
                # Put back without a checkpoint, then one call a side untimed: the first writes after
                # the put-back would otherwise land in every block's first sample.
                for schema in schemas:
                    reset(dsn, schema, checkpoint=False)
                done = [False, False]
            a = draw_available(shape, rng)
            for i, tq in enumerate(queues):
                for timed in (False, True) if new_block else (True,):
                    if done[i]:
                        continue
                    t0 = time.perf_counter()
                    got = tq.claim_many(available=a, limit=limit, order=shape.order,  # type: ignore[arg-type]
                                        queues=shape.queue_list)
                    elapsed = time.perf_counter() - t0
                    if not got:
                        done[i] = True
                        continue
                    if timed:
                        lat[i].append(elapsed / len(got))
                    tq.complete_many([(t, None) for t in got])
    finally:
        for tq in queues:
            tq.close()
    for schema in schemas:
        reset(dsn, schema)
    return common.latency_summary(lat[0]), common.latency_summary(lat[1])


@contextlib.contextmanager
def naive_index(dsn: str, schema: str, shape: Shape) -> Iterator[None]:
    """The naive query's own index, in its claim order, for one phase of it only (ours never sees it)."""
    common.execute(dsn, schema, shape.naive_index, "ANALYZE tasks", "CHECKPOINT")
    try:
        yield
    finally:
        common.execute(dsn, schema, "DROP INDEX bench_naive")


def naive_phase(dsn: str, shape: Shape, clients: int, args: dict[str, Any], seconds: float) -> float:
    """One timed phase of the naive query over its own index, which exists only for it."""
    with naive_index(dsn, SCHEMA, shape):
        rate, _ = phase(naive_client, clients, args, f"{shape.name} naive x{clients}", seconds)
    reset(dsn, SCHEMA)
    return rate


LEAN_COLUMNS = """SELECT string_agg(quote_ident(attname), ', ' ORDER BY attnum) FROM pg_attribute
 WHERE attrelid = 'tasks'::regclass AND attnum > 0 AND NOT attisdropped"""


def make_lean_copy(dsn: str, schema: str, shape: Shape) -> None:
    """The issue's reference table: the same rows, their key and the naive index, nothing else (LEAN_TABLE)."""
    columns = common.rows(dsn, schema, LEAN_COLUMNS)[0][0]
    common.execute(dsn, schema, f"DROP TABLE IF EXISTS {LEAN_TABLE}",
                   f"CREATE TABLE {LEAN_TABLE} (LIKE tasks INCLUDING DEFAULTS)",
                   f"INSERT INTO {LEAN_TABLE} ({columns}) SELECT {columns} FROM tasks",
                   f"ALTER TABLE {LEAN_TABLE} ADD PRIMARY KEY (id)",
                   shape.naive_index.replace("bench_naive ON tasks", f"bench_naive_lean ON {LEAN_TABLE}"),
                   f"VACUUM ANALYZE {LEAN_TABLE}")


def lean_phase(dsn: str, shape: Shape, clients: int, args: dict[str, Any], seconds: float) -> float:
    """One timed phase of the naive query on the lean copy; its rows are put back after."""
    rate, _ = phase(naive_client, clients, {**args, "table": LEAN_TABLE},
                    f"{shape.name} naive (lean copy) x{clients}", seconds)
    reset(dsn, SCHEMA, table=LEAN_TABLE)
    return rate


def measure(dsn: str, shape: Shape, rows: int, seconds: float) -> dict[str, Any]:
    common.console.log(f"shapes: {shape.name}: seeding {rows:,} rows")
    seed(dsn, SCHEMA, shape, rows)
    make_lean_copy(dsn, SCHEMA, shape)
    cap = max(1, rows // 4 // CLIENTS)
    args = {"dsn": dsn, "schema": SCHEMA, "shape": shape, "cap": cap}
    out: dict[str, Any] = {"shape": shape.name, "what": shape.what, "rows": rows, "hard": shape.hard}
    for clients in (1, CLIENTS):
        naives: list[float] = []
        leans: list[float] = []
        ourses: list[float] = []
        lat: list[float] = []
        for r in range(ROUNDS[clients]):
            for side in (("naive", "lean", "ours") if r % 2 == 0 else ("ours", "lean", "naive")):
                if side == "naive":
                    naives.append(naive_phase(dsn, shape, clients, args, seconds))
                elif side == "lean":
                    leans.append(lean_phase(dsn, shape, clients, args, seconds))
                else:
                    rate, got = phase(ours_client, clients, args, f"{shape.name} ours x{clients}", seconds)
                    ourses.append(rate)
                    lat += got
                    reset(dsn, SCHEMA)
        naive, ours, lean = statistics.median(naives), statistics.median(ourses), statistics.median(leans)
        by_id, _ = phase(_by_id_client, clients, {**args, "clients": clients}, f"{shape.name} by id x{clients}",
                          seconds)
        reset(dsn, SCHEMA)
        out[f"x{clients}"] = {"naive_per_s": naive, "ours_per_s": ours, "ratio": common.ratio(ours, naive),
                              "by_id_per_s": by_id, "of_ceiling": common.ratio(ours, by_id),
                              "naive_lean_per_s": lean, "ratio_lean": common.ratio(ours, lean),
                              "ours_claim": common.latency_summary(lat),
                              "rounds": {"naive_per_s": naives, "ours_per_s": ourses, "naive_lean_per_s": leans}}
    seed(dsn, SMALL_SCHEMA, shape, min(SMALL_ROWS, rows))
    small, big = claim_latency(dsn, (SMALL_SCHEMA, SCHEMA), shape, 500)
    # 100 calls a side in 5 blocks of 20 (the 10k backlog put back between them): the p99 of 20 calls, as
    # measured before 2026-11-29, was their slowest, often one fsync stall.
    batch_small, batch_big = claim_latency(dsn, (SMALL_SCHEMA, SCHEMA), shape, BATCH_CALLS, limit=100,
                                           blocks=BATCH_BLOCKS)
    common.drop_schema(dsn, SMALL_SCHEMA)
    out["p99_ms"] = {"small": small["p99_ms"], "big": big["p99_ms"]}
    out["p99_growth"] = common.ratio(big["p99_ms"], small["p99_ms"])
    out["batch_p99_ms_per_task"] = {"small": batch_small["p99_ms"], "big": batch_big["p99_ms"]}
    out["batch_p99_growth"] = common.ratio(batch_big["p99_ms"], batch_small["p99_ms"])
    out["batch_p50_ms_per_task"] = {"small": batch_small["p50_ms"], "big": batch_big["p50_ms"]}
    out["batch_p50_growth"] = common.ratio(batch_big["p50_ms"], batch_small["p50_ms"])
    out["batch_calls"] = {"small": batch_small["n"], "big": batch_big["n"]}
    target = 100.0 if shape.hard else 0.8
    out["target_ratio"] = target
    out["met"] = all(out[f"x{c}"]["ratio"] >= target for c in (1, CLIENTS)) and out["p99_growth"] <= 1.5
    # Against the issue's own reference, the naive query on a lean copy of the rows (since 2026-12-01).
    out["met_lean"] = all(out[f"x{c}"]["ratio_lean"] >= target for c in (1, CLIENTS)) and out["p99_growth"] <= 1.5
    # The issue holds claim_many(limit=100) to the same bounds per task: its growth is judged apart, so
    # that "met" stays comparable with the runs recorded before this flag.
    out["batch_met"] = out["batch_p99_growth"] <= 1.5
    return out


def run(opts: common.Options) -> dict[str, Any]:
    rows = opts.rows or DEFAULT_ROWS
    seconds = opts.seconds or 5.0
    wanted = set(opts.only.split(",")) if getattr(opts, "only", None) else None
    results = [measure(opts.dsn, s, rows, seconds) for s in SHAPES if wanted is None or s.name in wanted]
    common.drop_schema(opts.dsn, SCHEMA)
    return {"scenario": "shapes", "rows": rows, "seconds_per_phase": seconds, "clients": CLIENTS, "shapes": results}
