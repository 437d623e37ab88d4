"""The shapes of data the fit claim is measured on (issue #9), and the SQL that seeds, resets and claims them.

Each ``Shape`` is a backlog written as SQL over ``g`` (1..N) and ``n`` (N):
its priorities, its sizes, what a consumer has available, its order, its
queues and pools. ``bench/shapes.py`` runs them against the naive query;
the plan tests (tests/test_claim_plan_shapes.py) read the same catalog.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

NAIVE_INDEX = "CREATE INDEX bench_naive ON tasks (priority, id) WHERE state = 'queued'"
# order="max" reads (priority DESC, id): a user who claims that way builds the
# index that order needs. A backward scan of (priority, id) yields id
# descending within a priority, so the naive query would sort each priority's
# fitting rows on every claim (an incremental sort): 30 claims/s on
# mb_half_max, where its own index gives it the walk the min order gets.
NAIVE_INDEX_MAX = "CREATE INDEX bench_naive ON tasks (priority DESC, id) WHERE state = 'queued'"
#: The issue's reference: the naive query "on a copy of the same rows, with an index on (priority, id)".
#: The copy has the queue table's columns and rows, its primary key and the naive index, and nothing
#: else: no CHECK constraint, no other index, no generated column. On the queue's own table the naive
#: query pays for every index and constraint of ``tasks`` at each of its writes, as ours does.
LEAN_TABLE = "naive_lean"


def on_table(sql: str, table: str) -> str:
    """A statement of this catalog (the naive claim, its completion, the by-id claim, RESET) on ``table``."""
    return sql.replace("UPDATE tasks", f"UPDATE {table}").replace("FROM tasks t", f"FROM {table} t")


POOLS = 200  # pools p0..p199; the even ones have limit 0 (full)


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

    def naive_sql(self, table: str = "tasks") -> str:
        """The naive claim, on the queue's table or on a lean copy of its rows (``LEAN_TABLE``)."""
        return on_table(self._sql(NAIVE), table)

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
# Sizes in MB over 1..1M; the 0.05% needing 1..500 hold the worst priorities (RARE) or the lowest (RARE_MAX).
RARE = "CASE WHEN g > n * 0.9995 THEN 1 + g %% 500 ELSE 501 + (g * 7919) %% 999500 END"
RARE_MAX = "CASE WHEN g <= n * 0.0005 THEN 1 + g %% 500 ELSE 501 + (g * 7919) %% 999500 END"
# Sizes in bytes spread over [999,000,000, 1,001,000,000), in no order of id: most in the fine bucket of
# 1 GB + 1, the rest in the one above it.
BYTES_DENSE = "999000000 + (g * 104729) %% 2000000"
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
    # Found by the second random draw (random_shapes --seed 2, r27): dense and descending over one queue,
    # with a few tasks a priority, so the look over one priority runs dry at every claim.
    Shape("epoch_rising_max", "order=max; one queue; priorities are epoch seconds of one day (86,400 "
          "distinct, in no order of id); required rises with id; 90% fit",
          "1700000000 + (g * 7919) %% 86400", "1 + g * 1000000 / n", 900_001, order="max"),
    # Found by the same draw on claim_tasks v34 (r12): every task its own priority, in no order of id, half
    # fitting, descending. The tasks too big pile up at the head, one more a claim, spread over priorities.
    Shape("shuffled_rising_max", "order=max; one queue; every task its own priority, in no order of id; "
          "required rises with id; half fit", "(g * 7919) %% n", "1 + g * 1000000 / n", 500_001, order="max"),
    # Found by the third random draw (r16): descending over one queue, every task its own priority, sizes in
    # bytes within 1 MB of 1 GB, 30% fitting. The tasks too big pile up at the head past the look's budget,
    # and then the boundary answers every claim: fit_candidate v11's descending walk moved a row or two a
    # turn there, so its scan read every fit (migration 0051).
    Shape("bytes_dense_max", "order=max; one queue; every task its own priority, rising with id; sizes in "
          "bytes within 1 MB of 1 GB, each drawn apart; 30% fit", "g", BYTES_DENSE, 999_600_000,
          order="max"),
    # After the wide random draw's w16 (random_shapes --seed 6 --wide): over 1,000 queues with no list and
    # very few fits, few_fits v1 read no more than 128 queues, so each claim read every queue's range again
    # in fit_candidate (migration 0053).
    Shape("queues_mb_rare", "1,000 queues; every task its own priority; required 1..1M (MB); the 0.05% "
          "needing 1..500 hold the worst priorities; 500 available", "g", RARE, 500, hard=True, queues=1000),
    Shape("queues_mb_rare_max", "order=max; queues_mb_rare with the fitting 0.05% at the lowest priorities",
          "g", RARE_MAX, 500, order="max", hard=True, queues=1000),
    # The wide random draw's w16 itself: the fits are spread over the order, so the walk along the shared
    # order reached each one before any claim asked fit_candidate, and no read said they were few: every
    # claim walked (60 ms at 200,000 tasks, migration 0054).
    Shape("queues_epoch_falling_rare", "1,000 queues; priorities are epoch seconds of one day (in no order "
          "of id); required falls as id grows; the newest 0.05% fit", "1700000000 + (g * 7919) %% 86400",
          "1 + (n - g) * 1000000 / n", 500, hard=True, queues=1000),
    # Found by the ninth random draw (r1, random_shapes --seed 9): every task its own priority, falling with
    # id, in one of 200 pools, half of them full; half fit. Parking read ahead only within the passed rows'
    # priorities, so with every task its own priority a claim parked just what it passed (migration 0057).
    Shape("distinct_linked_half_max_pools", "order=max; every task its own priority, falling as id grows; "
          "300 sizes 1..898 in no order of id; each task in one of 200 pools, half of them full; half fit",
          "n - g", "1 + ((g * 7919) %% 300) * 3", 451, order="max", pools=True),
    # The tenth random draw's r23: over every queue with 16..63 available, a claim whose look ran dry asked
    # each queue's levels (about 4,000 probes); step S now reads every queue by exact size (migration 0058).
    Shape("queues_zero_mix_max", "order=max; 100 queues; 300 priorities; a third need 0, the rest 1..100; "
          "25 available (half fit)",
          "(g * 7919) %% 300", "CASE WHEN g %% 3 = 0 THEN 0 ELSE 1 + (g * 7919) %% 100 END", 25,
          order="max", queues=100),
    # The eleventh random draw's r24: 20 of 40 queues listed; priorities 0 and 2 lie wholly in full pools
    # (the pool and queue follow id's parity), so the head of the list is a wall of fits in full pools that
    # a claim met one pool at a time; park_rows now reads ahead in bulk after 8 of them (migration 0059).
    Shape("listed_levels_full_head", "40 queues, a consumer lists 20; priorities 0..9, the even ones wholly in "
          "full pools (200 pools, half of them full); required 1..10; 9 available (90% fit)",
          "(g * 31) %% 10", "1 + (g * 7919) %% 10", 9, queues=40, listed=20, pools=True),
]


def chosen(only: str | None, default: tuple[str, ...] | list[str], scenario: str) -> list[Shape]:
    """The shapes named in ``--only`` (comma-separated), else ``default``; an unknown name stops the run."""
    wanted = [s.strip() for s in only.split(",")] if only else list(default)
    by_name = {s.name: s for s in SHAPES}
    unknown = sorted(set(wanted) - set(by_name))
    if unknown:
        raise SystemExit(f"{scenario}: no shape {', '.join(unknown)}")
    return [by_name[name] for name in wanted]

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
