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
Claimed rows are put back between phases. With 8 consumers, naive and ours
run 3 interleaved phases each and each side's figure is the median (ROUNDS).
"""

from __future__ import annotations

import random
import statistics
import time
from dataclasses import dataclass
from typing import Any

import psycopg

from . import common

DEFAULT_ROWS = 1_000_000
SMALL_ROWS = 10_000
CLIENTS = 8
SCHEMA = "bench_shapes"
SMALL_SCHEMA = "bench_shapes_small"
NAIVE_INDEX = "CREATE INDEX bench_naive ON tasks (priority, id) WHERE state = 'queued'"
# order="max" reads (priority DESC, id): a user who claims that way builds the
# index that order needs. A backward scan of (priority, id) yields id
# descending within a priority, so the naive query would sort each priority's
# fitting rows on every claim (an incremental sort): 30 claims/s on
# mb_half_max, where its own index gives it the walk the min order gets.
NAIVE_INDEX_MAX = "CREATE INDEX bench_naive ON tasks (priority DESC, id) WHERE state = 'queued'"
POOLS = 200  # pools p0..p199; the even ones have limit 0 (full)
#: Timed phases of naive and ours per consumer count, interleaved (naive first
#: in odd rounds, ours first in even ones); each side's figure is its median.
#: Eight consumers on two cores move by a fifth from one 5 s phase to the
#: next (one_size, same code: 0.64 to 0.96 of the naive query), one consumer
#: far less.
ROUNDS = {1: 1, CLIENTS: 3}


@dataclass(frozen=True)
class Shape:
    name: str
    what: str
    priority: str  # SQL over g (1..N) and n (N)
    required: str
    available: int | tuple[int, int]  # a constant, or uniform per claim
    order: str = "min"
    pools: bool = False
    hard: bool = False  # the naive query must walk past most rows: target 100x
    queues: int = 1  # tasks spread over this many queues; both sides claim from every queue...
    listed: int = 0  # ...or from a list of the first `listed` of them (q0, q1, ...), as seed 002's agents do

    @property
    def queue_list(self) -> list[str] | None:
        return [f"q{i}" for i in range(self.listed)] if self.listed else None

    def _sql(self, template: str) -> str:
        order = "priority DESC, id" if self.order == "max" else "priority, id"
        return template.format(order=order, listed="AND queue = ANY (%(queues)s)" if self.listed else "")

    @property
    def naive_index(self) -> str:
        """The naive query's own index, in its claim order."""
        return NAIVE_INDEX_MAX if self.order == "max" else NAIVE_INDEX

    def naive_sql(self) -> str:
        return self._sql(NAIVE)

    def by_id_sql(self) -> str:
        return self._sql(BY_ID_IDS)

    def naive_params(self, available: int) -> dict[str, Any]:
        return {"a": available, "pools": self.pools, "queues": self.queue_list}


MB = "1 + ((g * 7919) %% 1000000)"
# Every task its own priority (g); 99% need 5..64; the 1% needing 1..4 hold the worst priorities.
DEADLINES = "CASE WHEN g > n * 0.99 THEN 1 + g %% 4 ELSE 5 + (g * 7919) %% 60 END"
DEADLINES_MAX = "CASE WHEN g <= n * 0.01 THEN 1 + g %% 4 ELSE 5 + (g * 7919) %% 60 END"  # the 1% at the lowest
# Sizes in bytes around 1 GB, all in the fine bucket of 1 GB + 1 ([998,244,352, 1,000,341,504)):
# the fitting ones up to 1.76 MB below it, the others up to 341 kB above it.
BYTES_FITS = "998244352 + (g * 7919) %% 1755649"
BYTES_TOO_BIG = "1000000001 + (g * 7919) %% 341503"
BYTES = f"CASE WHEN g > n * 0.99 THEN {BYTES_FITS} ELSE {BYTES_TOO_BIG} END"  # the fitting 1% hold the worst priorities
# Sizes in bytes from low + 2 MB down to low as id grows, each its own: with 1 GB available and low = 999 MB
# the newest half fit; the boundary bucket holds both the too-big rows (first) and the fits (after them).
BYTES_FALLING = "{low} + (n - g) * 2000000 / n"
FALLING = "1 + (n - g) * 1000000 / n"  # sizes 1..1M falling as id grows: the newest fit
SHAPES = [
    Shape("seed000", "priorities 0..9; only priority 9 (0.5%) fits",
          "CASE WHEN g %% 200 = 0 THEN 9 ELSE (g * 31) %% 9 END",
          "CASE WHEN g %% 200 = 0 THEN 1 + (g / 200) %% 10 ELSE 11 + (g * 7919) %% 90 END", 10, hard=True),
    Shape("mb_half", "one priority; required 1..1M (MB); half fit", "0", MB, 500_000),
    Shape("mb_few", "one priority; required 1..1M; 2% fit", "0", MB, 20_000),
    Shape("deadlines", "every task its own priority; 99% need 5..64; the 1% needing 1..4 hold the worst priorities",
          "g", DEADLINES, 4, hard=True),
    Shape("both", "priorities 0..999 and required 1..10,000; available uniform per claim",
          "(g * 7919) %% 1000", "1 + (g * 104729) %% 10000", (1, 10_000)),
    Shape("falling", "one priority; required falls as id grows; the newest 1% fit",
          "0", FALLING, 10_000, hard=True),
    Shape("falling_mid", "one priority; required falls as id grows; the newest half fit",
          "0", FALLING, 500_000, hard=True),
    Shape("rising", "one priority; required rises with id; the oldest half fit", "0", "1 + g * 1000000 / n", 500_000),
    Shape("just_above", "priorities 0..8 need available+1..+3; the 1% at priority 9 need available",
          "CASE WHEN g %% 100 = 0 THEN 9 ELSE (g * 31) %% 9 END",
          "CASE WHEN g %% 100 = 0 THEN 500000 ELSE 500001 + g %% 3 END", 500_000, hard=True),
    Shape("just_above_mixed", "priorities 0..9; 99% need available+1..+3; 1% (spread) need available",
          "(g * 31) %% 10", "CASE WHEN g %% 100 = 0 THEN 500000 ELSE 500001 + g %% 3 END", 500_000),
    Shape("huge_levels", "levels 1,000 / 1M / 2^30 at priorities 0..8; the 1% of size 1 at priority 9",
          "CASE WHEN g %% 100 = 0 THEN 9 ELSE (g * 31) %% 9 END",
          "CASE WHEN g %% 100 = 0 THEN 1 WHEN g %% 3 = 0 THEN 1000 WHEN g %% 3 = 1 THEN 1000000 ELSE 1073741824 END",
          999, hard=True),
    Shape("deadlines_max", "order=max; every task its own priority; the 1% that fit hold the lowest priorities",
          "g", DEADLINES_MAX, 4, order="max", hard=True),
    Shape("mb_half_pools", "mb_half, each task in one of 200 pools, half of them full", "0", MB, 500_000, pools=True),
    Shape("deadlines_pools", "deadlines, 200 pools, half of them full",
          "g", DEADLINES, 4, pools=True, hard=True),
    Shape("one_size", "one priority; every task needs 1; 4 available (slots)", "0", "1", 4),
    Shape("one_size_max", "order=max; priorities 0..2; every task needs 1; 4 available (a priority fills "
          "every bucket read, so the small descending claim falls back)", "g %% 3", "1", 4, order="max"),
    Shape("queues_dense", "1,000 queues; priorities 0..9; required 1..100; every task fits",
          "(g * 31) %% 10", "1 + (g * 7919) %% 100", 100, queues=1000),
    Shape("queues_half", "1,000 queues; priorities 0..9; required 1..100; half fit",
          "(g * 31) %% 10", "1 + (g * 7919) %% 100", 50, queues=1000),
    Shape("listed_dense", "40 queues, a consumer lists 20; priorities 0..9; required 1..100; every task fits",
          "(g * 31) %% 10", "1 + (g * 7919) %% 100", 100, queues=40, listed=20),
    Shape("listed_half", "40 queues, a consumer lists 20; priorities 0..9; required 1..100; half fit",
          "(g * 31) %% 10", "1 + (g * 7919) %% 100", 50, queues=40, listed=20),
    Shape("mb_half_max", "order=max; priorities 0..9; required 1..1M; half fit",
          "(g * 31) %% 10", MB, 500_000, order="max"),
    Shape("bytes_boundary", "sizes in bytes, 1 GB available; every task its own priority; 99% need 1 B..341 kB "
          "more, the 1% at the worst priorities need up to 1.76 MB less (10k distinct sizes)",
          "g", BYTES, 1_000_000_000, hard=True),
    Shape("bytes_boundary_max", "order=max; bytes_boundary with the fitting 1% at the lowest priorities",
          "g", f"CASE WHEN g <= n * 0.01 THEN {BYTES_FITS} ELSE {BYTES_TOO_BIG} END",
          1_000_000_000, order="max", hard=True),
    Shape("queues_deadlines",
          "1,000 queues; every task its own priority; the 1% needing 1..4 hold the worst priorities",
          "g", DEADLINES, 4, hard=True, queues=1000),
    Shape("queues_deadlines_max", "order=max; queues_deadlines with the fitting 1% at the lowest priorities",
          "g", DEADLINES_MAX, 4, order="max", hard=True,
          queues=1000),
    Shape("queues_bytes", "100 queues; bytes_boundary spread over them",
          "g", BYTES, 1_000_000_000, hard=True, queues=100),
    Shape("both_max", "order=max; priorities 0..999 and required 1..10,000; available uniform per claim",
          "(g * 7919) %% 1000", "1 + (g * 104729) %% 10000", (1, 10_000), order="max"),
    Shape("queues_half_max", "order=max; 1,000 queues; priorities 0..9; required 1..100; half fit",
          "(g * 31) %% 10", "1 + (g * 7919) %% 100", 50, order="max", queues=1000),
    Shape("queues_mb_half_max", "order=max; 100 queues; priorities 0..9; required 1..1M; half fit",
          "(g * 31) %% 10", MB, 500_000, order="max", queues=100),
    Shape("queues_falling", "100 queues; one priority; required falls as id grows; the newest 1% fit",
          "0", FALLING, 10_000, hard=True, queues=100),
    Shape("queues_bytes_max", "order=max; 100 queues; bytes_boundary_max spread over them",
          "g", f"CASE WHEN g <= n * 0.01 THEN {BYTES_FITS} ELSE {BYTES_TOO_BIG} END", 1_000_000_000,
          order="max", hard=True, queues=100),
    Shape("queues_deadlines_max16", "order=max; 1,000 queues; every task its own priority; 99% need 17..64, "
          "the 1% needing 1..16 hold the lowest priorities; 16 available",
          "g", "CASE WHEN g <= n * 0.01 THEN 1 + g %% 16 ELSE 17 + (g * 7919) %% 48 END", 16,
          order="max", hard=True, queues=1000),
    Shape("queues_deadlines_mb_max", "order=max; 1,000 queues; every task its own priority; required 1..1M (MB); "
          "2% fit", "g", MB, 20_000, order="max", queues=1000),
    Shape("listed_half_max", "order=max; 40 queues, a consumer lists 20; priorities 0..9; required 1..100; half fit",
          "(g * 31) %% 10", "1 + (g * 7919) %% 100", 50, order="max", queues=40, listed=20),
    Shape("listed_mb_half_max", "order=max; 40 queues, a consumer lists 20; priorities 0..9; required 1..1M; "
          "half fit", "(g * 31) %% 10", MB, 500_000, order="max", queues=40, listed=20),
    Shape("listed_long", "1,000 queues, a consumer lists 200; priorities 0..9; required 1..100; "
          "half fit", "(g * 31) %% 10", "1 + (g * 7919) %% 100", 50, queues=1000, listed=200),
    Shape("listed_deadlines", "40 queues, a consumer lists 20; every task its own priority; the 1% needing "
          "1..4 hold the worst priorities", "g", DEADLINES, 4, hard=True, queues=40, listed=20),
    Shape("deadlines_mb_half", "every task its own priority; required 1..1M (MB); half fit", "g", MB, 500_000),
    Shape("half", "priorities 0..9; required 1..100; half fit", "(g * 31) %% 10", "1 + (g * 7919) %% 100", 50),
    # Shapes added after the first run of all 39 (found by trying shapes none of the above covers):
    Shape("bytes_falling", "one priority; sizes in bytes around 1 GB, each its own, falling as id grows; the "
          "newest half fit (fitting and too-big rows alike fill the boundary bucket)",
          "0", BYTES_FALLING.format(low=999_000_000), 1_000_000_000),
    Shape("bytes_falling_few", "bytes_falling with the newest 1% fitting", "0",
          BYTES_FALLING.format(low=999_980_000), 1_000_000_000, hard=True),
    Shape("falling_max", "order=max; one priority; required falls as id grows; the newest 1% fit",
          "0", FALLING, 10_000, order="max", hard=True),
    Shape("mb_half_max_pools", "mb_half_max, each task in one of 200 pools, half of them full",
          "(g * 31) %% 10", MB, 500_000, order="max", pools=True),
    Shape("listed_half_pools", "listed_half, each task in one of 200 pools, half of them full",
          "(g * 31) %% 10", "1 + (g * 7919) %% 100", 50, queues=40, listed=20, pools=True),
    Shape("deadlines_mb_uniform", "every task its own priority; required 1..1M (MB); available uniform per claim",
          "g", MB, (1, 1_000_000)),
    Shape("listed_falling", "40 queues, a consumer lists 20; one priority; required falls as id grows; "
          "the newest 1% fit", "0", FALLING, 10_000, hard=True, queues=40, listed=20),
    Shape("listed_bytes", "40 queues, a consumer lists 20; bytes_boundary spread over them",
          "g", BYTES, 1_000_000_000, hard=True, queues=40, listed=20),
]

SEED = """
INSERT INTO tasks (queue, payload, priority, required, pool, state, max_attempts)
SELECT CASE WHEN {queues} = 1 THEN 'default' ELSE 'q' || (g * 17) %% {queues} END, '{{}}'::jsonb, {priority}, {required},
       CASE WHEN %(pools)s THEN 'p' || (g * 13) %% {npools} END, 'queued', 3
  FROM generate_series(1::bigint, %(n)s) g, (SELECT %(n)s::bigint AS n) c
"""
RESET = """
UPDATE tasks SET state = 'queued', attempts = 0, worker = NULL, lease_token = NULL, lease_seconds = NULL,
       lease_expires_at = NULL, started_at = NULL, finished_at = NULL, parked = false
 WHERE state <> 'queued' OR parked
"""
NAIVE = """
WITH c AS MATERIALIZED (
    SELECT id FROM tasks t
     WHERE state = 'queued' AND required <= %(a)s {listed}
       AND (NOT %(pools)s OR NOT EXISTS (SELECT 1 FROM pools p WHERE p.name = t.pool
                                           AND p.running_limit IS NOT NULL AND p.running >= p.running_limit))
     ORDER BY {order} LIMIT 1 FOR UPDATE SKIP LOCKED)
UPDATE tasks t SET state = 'running', attempts = t.attempts + 1, started_at = now(), worker = 'naive',
       lease_token = gen_random_uuid(), lease_seconds = 60, lease_expires_at = now() + interval '60 seconds'
  FROM c WHERE t.id = c.id
RETURNING t.id
"""
BY_ID_IDS = """
SELECT id FROM tasks t
 WHERE state = 'queued' AND required <= %(a)s {listed} AND id %% %(clients)s = %(idx)s
   AND (NOT %(pools)s OR NOT EXISTS (SELECT 1 FROM pools p WHERE p.name = t.pool
                                       AND p.running_limit IS NOT NULL AND p.running >= p.running_limit))
 ORDER BY {order} LIMIT %(cap)s
"""
BY_ID_CLAIM = """
UPDATE tasks SET state = 'running', attempts = attempts + 1, started_at = now(), worker = 'by-id',
       lease_token = gen_random_uuid(), lease_seconds = 60, lease_expires_at = now() + interval '60 seconds'
 WHERE id = %s AND state = 'queued'
"""
NAIVE_DONE = """
UPDATE tasks SET state = 'done', finished_at = now(), lease_token = NULL, lease_expires_at = NULL WHERE id = %s
"""


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


def reset(dsn: str, schema: str) -> None:
    """Claimed rows put back, and a checkpoint, so each phase starts with the same full-page writes ahead of it."""
    common.execute(dsn, schema, RESET, "UPDATE pools SET running = 0", "VACUUM ANALYZE tasks", "CHECKPOINT")


def _available(shape: Shape, rng: random.Random) -> int:
    if isinstance(shape.available, tuple):
        return rng.randint(*shape.available)
    return shape.available


def _connect(args: dict[str, Any]) -> psycopg.Connection[Any]:
    """A bare psycopg connection on the shape's schema (the naive and by-id clients)."""
    conn = psycopg.connect(args["dsn"])
    conn.execute("SELECT set_config('search_path', %s, false)", (f'"{args["schema"]}"',))
    conn.commit()
    return conn


def _naive_client(idx: int, args: dict[str, Any], counter: Any, sync: Any) -> dict[str, Any]:
    shape: Shape = args["shape"]
    sql = shape.naive_sql()
    rng = random.Random(idx)
    with _connect(args) as conn:
        stop = common.ready(counter, sync)
        n = 0
        while not stop.is_set() and n < args["cap"]:
            row = conn.execute(sql, shape.naive_params(_available(shape, rng))).fetchone()
            conn.commit()
            if row is None:
                break
            conn.execute(NAIVE_DONE, (row[0],))
            conn.commit()
            n += 1
            counter.value = n
    return {"count": n}


def _by_id_client(idx: int, args: dict[str, Any], counter: Any, sync: Any) -> dict[str, Any]:
    """The ceiling: the rows the naive query would take, claimed and completed by id, no search on the clock."""
    shape: Shape = args["shape"]
    a = shape.available[1] if isinstance(shape.available, tuple) else shape.available
    with _connect(args) as conn:
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


def _ours_client(idx: int, args: dict[str, Any], counter: Any, sync: Any) -> dict[str, Any]:
    from taskqueue import TaskQueue

    shape: Shape = args["shape"]
    rng = random.Random(idx)
    # The defaults, as a user's: one thread opens one connection, held for its one-statement calls.
    tq = TaskQueue(args["dsn"], schema=args["schema"])
    tq.peek(available=1)
    stop = common.ready(counter, sync)
    n, lat = 0, []
    while not stop.is_set() and n < args["cap"]:
        a = _available(shape, rng)
        t0 = time.perf_counter()
        task = tq.claim(available=a, worker=f"ours-{idx}", order=shape.order,  # type: ignore[arg-type]
                        queues=shape.queue_list)
        lat.append(time.perf_counter() - t0)
        if task is None:
            break
        if task.required > a:
            raise RuntimeError(f"claimed {task!r} with available={a}")
        tq.complete(task)
        n += 1
        counter.value = n
    tq.close()
    return {"count": n, "lat": lat}


def _phase(fn: Any, clients: int, args: dict[str, Any], label: str, seconds: float) -> tuple[float, list[float]]:
    elapsed, res, count = common.run_clients(fn, clients, args, label=label, total=seconds, seconds=seconds)
    return count / elapsed, [x for r in res for x in r.get("lat", [])]


def claim_latency(dsn: str, schemas: tuple[str, str], shape: Shape, samples: int,
                  limit: int = 1) -> tuple[dict[str, float], dict[str, float]]:
    """One consumer per backlog, their claims interleaved: ``samples`` claims (or claim_many of ``limit``) each.

    The two backlogs (10k and the full one) are measured turn by turn in one
    loop, so a slow spell of the disk (each claim commits, with an fsync)
    falls on both alike; claimed rows are put back afterwards.
    """
    from taskqueue import TaskQueue

    rng = random.Random(7)
    lat: tuple[list[float], list[float]] = ([], [])
    queues = [TaskQueue(dsn, schema=schema, pool_size=1) for schema in schemas]
    try:
        for tq in queues:
            tq.peek(available=1)
        done = [False, False]
        for _ in range(samples):
            a = _available(shape, rng)
            for i, tq in enumerate(queues):
                if done[i]:
                    continue
                t0 = time.perf_counter()
                got = tq.claim_many(available=a, limit=limit, order=shape.order,  # type: ignore[arg-type]
                                    queues=shape.queue_list)
                elapsed = time.perf_counter() - t0
                if not got:
                    done[i] = True
                    continue
                lat[i].append(elapsed / len(got))
                tq.complete_many([(t, None) for t in got])
    finally:
        for tq in queues:
            tq.close()
    for schema in schemas:
        reset(dsn, schema)
    return common.latency_summary(lat[0]), common.latency_summary(lat[1])


def _naive_phase(dsn: str, shape: Shape, clients: int, args: dict[str, Any], seconds: float) -> float:
    """One timed phase of the naive query over its own index, which exists only for it."""
    common.execute(dsn, SCHEMA, shape.naive_index, "ANALYZE tasks", "CHECKPOINT")
    rate, _ = _phase(_naive_client, clients, args, f"{shape.name} naive x{clients}", seconds)
    common.execute(dsn, SCHEMA, "DROP INDEX bench_naive")
    reset(dsn, SCHEMA)
    return rate


def measure(dsn: str, shape: Shape, rows: int, seconds: float) -> dict[str, Any]:
    common.console.log(f"shapes: {shape.name}: seeding {rows:,} rows")
    seed(dsn, SCHEMA, shape, rows)
    cap = max(1, rows // 4 // CLIENTS)
    args = {"dsn": dsn, "schema": SCHEMA, "shape": shape, "cap": cap}
    out: dict[str, Any] = {"shape": shape.name, "what": shape.what, "rows": rows, "hard": shape.hard}
    for clients in (1, CLIENTS):
        naives: list[float] = []
        ourses: list[float] = []
        lat: list[float] = []
        for r in range(ROUNDS[clients]):
            for side in (("naive", "ours") if r % 2 == 0 else ("ours", "naive")):
                if side == "naive":
                    naives.append(_naive_phase(dsn, shape, clients, args, seconds))
                else:
                    rate, got = _phase(_ours_client, clients, args, f"{shape.name} ours x{clients}", seconds)
                    ourses.append(rate)
                    lat += got
                    reset(dsn, SCHEMA)
        naive, ours = statistics.median(naives), statistics.median(ourses)
        by_id, _ = _phase(_by_id_client, clients, {**args, "clients": clients}, f"{shape.name} by id x{clients}",
                          seconds)
        reset(dsn, SCHEMA)
        out[f"x{clients}"] = {"naive_per_s": naive, "ours_per_s": ours, "ratio": common.ratio(ours, naive),
                              "by_id_per_s": by_id, "of_ceiling": common.ratio(ours, by_id),
                              "ours_claim": common.latency_summary(lat),
                              "rounds": {"naive_per_s": naives, "ours_per_s": ourses}}
    seed(dsn, SMALL_SCHEMA, shape, min(SMALL_ROWS, rows))
    small, big = claim_latency(dsn, (SMALL_SCHEMA, SCHEMA), shape, 500)
    batch_small, batch_big = claim_latency(dsn, (SMALL_SCHEMA, SCHEMA), shape, 20, limit=100)
    common.drop_schema(dsn, SMALL_SCHEMA)
    out["p99_ms"] = {"small": small["p99_ms"], "big": big["p99_ms"]}
    out["p99_growth"] = common.ratio(big["p99_ms"], small["p99_ms"])
    out["batch_p99_ms_per_task"] = {"small": batch_small["p99_ms"], "big": batch_big["p99_ms"]}
    out["batch_p99_growth"] = common.ratio(batch_big["p99_ms"], batch_small["p99_ms"])
    target = 100.0 if shape.hard else 0.8
    out["target_ratio"] = target
    out["met"] = all(out[f"x{c}"]["ratio"] >= target for c in (1, CLIENTS)) and out["p99_growth"] <= 1.5
    return out


def run(opts: common.Options) -> dict[str, Any]:
    rows = opts.rows or DEFAULT_ROWS
    seconds = opts.seconds or 5.0
    wanted = set(opts.only.split(",")) if getattr(opts, "only", None) else None
    results = [measure(opts.dsn, s, rows, seconds) for s in SHAPES if wanted is None or s.name in wanted]
    common.drop_schema(opts.dsn, SCHEMA)
    return {"scenario": "shapes", "rows": rows, "seconds_per_phase": seconds, "clients": CLIENTS, "shapes": results}


def table(result: dict[str, Any]) -> str:
    """The markdown table of docs/performance.md, from a ``shapes`` result."""
    lines = [
        "| shape | what | naive x1 | ours x1 | ratio x1 | naive x8 | ours x8 | ratio x8 | goal | "
        "p99 10k → 1M | growth | claim_many p99/task 10k → 1M | met |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for s in result["shapes"]:
        one, eight = s["x1"], s[f"x{result['clients']}"]
        lines.append(
            f"| {s['shape']} | {s['what']} | {one['naive_per_s']:,.1f}/s | {one['ours_per_s']:,.1f}/s | "
            f"{one['ratio']:,.2f}× | {eight['naive_per_s']:,.1f}/s | {eight['ours_per_s']:,.1f}/s | "
            f"{eight['ratio']:,.2f}× | ≥ {s['target_ratio']:g}× | "
            f"{s['p99_ms']['small']:.2f} → {s['p99_ms']['big']:.2f} ms | {s['p99_growth']:.2f}× | "
            f"{s['batch_p99_ms_per_task']['small']:.3f} → {s['batch_p99_ms_per_task']['big']:.3f} ms | "
            f"{'yes' if s['met'] else 'no'} |"
        )
    return "\n".join(lines)


def ceiling_table(result: dict[str, Any]) -> str:
    """Ours against the by-id ceiling: the highest ratio to naive any claim could reach on this server."""
    lines = [
        "| shape | by id x1 | ours / by id x1 | by id / naive x1 | by id x8 | ours / by id x8 | by id / naive x8 |",
        "|---|---|---|---|---|---|---|",
    ]
    for s in result["shapes"]:
        cells = [s["shape"]]
        for c in (1, result["clients"]):
            x = s[f"x{c}"]
            if "by_id_per_s" not in x:
                cells += ["–", "–", "–"]
                continue
            cells += [f"{x['by_id_per_s']:,.1f}/s", f"{x['of_ceiling']:.2f}",
                      f"{common.ratio(x['by_id_per_s'], x['naive_per_s']):,.2f}×"]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def record_table(result: dict[str, Any]) -> str:
    """The compact table of a run of record: both ratios, the growth, and ours against the by-id ceiling."""
    lines = [
        "| shape | ratio x1 | ratio x8 | goal | p99 growth | claim_many p99/task at 1M | "
        "ours / by id (x1 / x8) | by id / naive (x1 / x8) | met |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for s in result["shapes"]:
        one, many = s["x1"], s[f"x{result['clients']}"]
        ceiling = " / ".join(f"{common.ratio(x['by_id_per_s'], x['naive_per_s']):,.2f}×" for x in (one, many))
        lines.append(
            f"| {s['shape']} | {one['ratio']:,.2f}× | {many['ratio']:,.2f}× | ≥ {s['target_ratio']:g}× | "
            f"{s['p99_growth']:.2f}× | {s['batch_p99_ms_per_task']['big']:.2f} ms | "
            f"{one['of_ceiling']:.2f} / {many['of_ceiling']:.2f} | {ceiling} | {'yes' if s['met'] else 'no'} |"
        )
    return "\n".join(lines)
