"""One busy pool: claims of tasks in one pool take turns on its row (issue #9, the eighth random draw).

Each claim of a pooled task takes a slot on its pool's row and each
completion gives it back, and the row stays locked until that transaction
commits: that is how the running count stays exact. When every task near the
head of the order sits in one pool, claims serialise on that row, and more
consumers add no claims. The shape here puts each priority's tasks in one
pool (priority ``(g * 13) % 1000``, pool ``p((g * 13) % 200)``, the even
pools full), on one queue, sizes 1..100.

Two comparisons, each with 1 and 8 consumers, in interleaved rounds:

- ``naive``/``ours``: the naive query against ``claim`` + ``complete`` at
  50 available (half the tasks fit), as ``bench shapes`` runs them. During
  ours' phases the active backends' wait events are sampled every 20 ms, so
  the share waiting on a row lock is on record.
- ``single``/``batch``: ``claim`` + ``complete`` against
  ``claim_many(limit=100)`` + ``complete_many``, every task fitting: a batch
  takes the pool row's lock once.

``python -m bench hot_pool [--rows N] [--seconds S]``
"""

from __future__ import annotations

import multiprocessing as mp
import queue
import statistics
import time
from collections import Counter
from typing import Any

import psycopg

from . import common
from . import shapes as S
from .shape_catalog import Shape

DEFAULT_ROWS = 200_000
ROUNDS = 2
CLIENT_COUNTS = (1, 8)
BATCH = 100
SIDES = ("naive", "ours", "single", "batch")
HOT = Shape("hot_pool", "one queue; each priority's tasks all in one pool (of 200, the even ones full); "
            "required 1..100; half fit", "(g * 13) %% 1000", "1 + (g * 7919) %% 100", 50, pools=True)
#: Wait events that mean a backend waits for another transaction's row lock.
ROW_LOCK_WAITS = ("Lock:transactionid", "Lock:tuple")


def batch_client(idx: int, args: dict[str, Any], counter: Any, sync: Any) -> dict[str, Any]:
    """claim (or claim_many of ``limit``) + complete (or complete_many) with no amount: every task fits."""
    from taskqueue import TaskQueue

    tq = TaskQueue(args["dsn"], schema=args["schema"])
    tq.peek(available=1)
    stop = common.ready(counter, sync)
    n = common.claim_complete_loop(tq, stop, counter, limit=args["limit"], cap=args["cap"], worker=f"hot-{idx}")
    tq.close()
    return {"count": n}


class WaitSampler:
    """Counts the wait events of the queue's active backends, every ``every`` seconds, while it runs.

    It samples from a process of its own, not a thread: the phase it watches
    forks its clients, and a fork of a process with a thread in libpq could
    copy a lock that thread holds.
    """

    def __init__(self, dsn: str, every: float = 0.02) -> None:
        ctx = mp.get_context("fork")
        self.counts: Counter[str] = Counter()
        self._stop = ctx.Event()
        self._out: Any = ctx.Queue()
        self._proc = ctx.Process(target=_sample, args=(dsn, every, self._stop, self._out), daemon=True)

    def __enter__(self) -> WaitSampler:
        self._proc.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        try:
            self.counts.update(self._out.get(timeout=30))
        except queue.Empty:
            raise RuntimeError(f"hot_pool: the wait sampler sent nothing (exit code {self._proc.exitcode})") from None
        finally:
            self._proc.join(timeout=10)


def _sample(dsn: str, every: float, stop: Any, out: Any) -> None:
    sql = ("SELECT coalesce(wait_event_type || ':' || wait_event, 'running') FROM pg_stat_activity"
           " WHERE application_name = 'taskqueue' AND state = 'active'")
    counts: Counter[str] = Counter()
    with psycopg.connect(dsn, autocommit=True) as conn:
        while not stop.is_set():
            for (event,) in conn.execute(sql):
                counts[event] += 1
            time.sleep(every)
    out.put(dict(counts))


def _side_rate(dsn: str, side: str, clients: int, args: dict[str, Any], seconds: float, waits: Counter[str]) -> float:
    """One timed phase of one side, its rows put back after it; ours' wait events go into ``waits``."""
    label = f"hot_pool {side} x{clients}"
    if side == "naive":
        return S.naive_phase(dsn, HOT, clients, args, seconds)  # it puts the rows back itself
    if side == "ours":
        with WaitSampler(dsn) as sampler:
            rate, _ = S.phase(S.ours_client, clients, args, label, seconds)
        waits.update(sampler.counts)
    else:
        limit = 1 if side == "single" else BATCH
        elapsed, _, count = common.run_clients(batch_client, clients, {**args, "limit": limit}, label=label,
                                               total=seconds, seconds=seconds)
        rate = count / elapsed
    S.reset(dsn, S.SCHEMA)
    return rate


def measure(dsn: str, rows: int, seconds: float, rounds: int = ROUNDS) -> dict[str, Any]:
    common.console.log(f"hot_pool: seeding {rows:,} rows")
    S.seed(dsn, S.SCHEMA, HOT, rows)
    out: dict[str, Any] = {}
    try:
        for clients in CLIENT_COUNTS:
            cell: dict[str, list[float]] = {side: [] for side in SIDES}
            waits: Counter[str] = Counter()
            args = {"dsn": dsn, "schema": S.SCHEMA, "shape": HOT, "cap": max(1, rows // 4 // clients)}
            for r in range(rounds):
                for side in SIDES if r % 2 == 0 else SIDES[::-1]:
                    cell[side].append(_side_rate(dsn, side, clients, args, seconds, waits))
            med = {side: statistics.median(v) for side, v in cell.items()}
            total = sum(waits.values())
            out[f"x{clients}"] = {
                "per_s": med, "rounds": cell,
                "ours_over_naive": common.ratio(med["ours"], med["naive"]),
                "batch_over_single": common.ratio(med["batch"], med["single"]),
                "ours_wait_samples": dict(waits.most_common()),
                "ours_row_lock_share": sum(waits[e] for e in ROW_LOCK_WAITS) / total if total else None,
            }
    finally:
        common.drop_schema(dsn, S.SCHEMA)
    return out


def run(opts: common.Options) -> dict[str, Any]:
    rows = opts.rows or DEFAULT_ROWS
    seconds = opts.seconds or 3.0
    result = measure(opts.dsn, rows, seconds)
    return {"scenario": "hot_pool", "rows": rows, "seconds_per_phase": seconds, "rounds": ROUNDS,
            "shape": HOT.what, **result}
