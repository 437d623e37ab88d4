"""One task over every queue with 16 to 63 available is read by exact size (claim_tasks v43).

Step S read each amount's first (or last) few rows of ix_tasks_fit_any_exact
only below 16, where one queue's buckets are exact. Over every queue that
index holds exact sizes whatever the amount, so v43 serves amounts up to 63
the same way, after a short read of the head of the order (where fits are
dense there, they are the answer). Before it, a pile of tasks too big at the
head sent such a claim along the shared order and then through each queue's
levels (the tenth random draw's r23: 100 queues, order="max", 5.9 ms a call
of fit_candidate). Claims must still take exactly what the plain rule takes
(tests/test_claim_exact.py's reference).
"""

from __future__ import annotations

import random
from typing import Any

import psycopg
import pytest

from taskqueue import TaskQueue
from tests.test_claim_exact import claims_match_the_reference, single_claims_match_the_reference

QUEUES = [f"q{i:02d}" for i in range(40)]


def zero_mix(rng: random.Random, n: int, pools: bool, pile: int = 1500) -> list[dict[str, Any]]:
    """r23's kind over 12 queues: a third need nothing, the rest 1..100, each task its own priority; the
    best ``pile`` in either order are too big for 63 (longer than a look's budget, the fits too many for
    step F), so a session's claims soon look in vain and step S serves them."""
    specs: list[dict[str, Any]] = []
    for i in range(n):
        need = 0 if i % 3 == 0 else rng.randint(1, 100)
        if i < pile or i >= n - pile:
            need = rng.choice((64, 80, 100))
        specs.append({"payload": {}, "queue": rng.choice(QUEUES[:12]), "priority": i, "required": need,
                      "pool": rng.choice((None, None, "p0", "p1")) if pools else None})
    return specs


@pytest.mark.parametrize("seed", range(3))
def test_claims_over_every_queue_of_16_to_63_match_the_reference(tq: TaskQueue, dsn: str, seed: int) -> None:
    rng = random.Random(4300 + seed)
    tq.enqueue_many(zero_mix(rng, 9000, pools=seed > 0))
    tq.set_pool_limit("p0", 0)
    tq.set_pool_limit("p1", 10)
    claims_match_the_reference(tq, dsn, rng, lambda: rng.choice((16, 17, 25, 40, 63, 64, 15)), limits=(1, 1, 1, 4))


@pytest.mark.parametrize("order", ["min", "max"])
def test_single_claims_with_rows_locked_elsewhere_match_the_reference(tq: TaskQueue, dsn: str, order: str) -> None:
    rng = random.Random(4310 if order == "min" else 4311)
    tq.enqueue_many(zero_mix(rng, 9000, pools=True))
    tq.set_pool_limit("p0", 0)
    tq.set_pool_limit("p1", 5)
    single_claims_match_the_reference(tq, dsn, rng, lambda: rng.choice((16, 25, 63)), lambda: None, order,
                                      lock_among=12, lock_share=0.5, steps=40, label=order)


def test_a_pile_at_the_head_is_passed_by_size_after_one_dry_look(tq: TaskQueue, dsn: str) -> None:
    """40 queues, order="max", the best 2,000 tasks too big for 25 and 16,000
    behind them of which about half fit (too many for step F): the first claim
    of a session looks in vain and asks fit_candidate, which arms the hint;
    the next 255 are step S's (no other function called), and the 257th goes
    the general way once more. Each claim is the plain rule's. Version 42 asked
    fit_candidate (after listing the queues) on every such claim."""
    rng = random.Random(4320)
    n, pile = 18_000, 2_000
    tq.enqueue_many([
        {"payload": {}, "queue": rng.choice(QUEUES), "priority": i,
         "required": rng.choice((26, 64, 100)) if i >= n - pile else (0 if i % 3 == 0 else rng.randint(1, 100))}
        for i in range(n)])
    with psycopg.connect(dsn, autocommit=True) as vac:
        vac.execute("VACUUM ANALYZE taskqueue.tasks")
    with psycopg.connect(dsn) as conn:
        conn.execute("SELECT set_config('search_path', 'taskqueue', false)")
        try:
            conn.execute("SET LOCAL track_functions = 'pl'")
        except psycopg.errors.InsufficientPrivilege:
            pytest.skip("counting function calls needs a role that may set track_functions")
        per_claim: list[dict[str, int]] = []
        before: dict[str, int] = {}
        for step in range(258):
            expected = [r[0] for r in conn.execute(
                "SELECT id FROM tasks WHERE state = 'queued' AND required <= 25 ORDER BY priority DESC, id LIMIT 1")]
            got = [r[0] for r in conn.execute("SELECT id FROM claim_tasks(25, 1, NULL, 'w', 60, true)")]
            assert got == expected, step
            now = {r[0]: r[1] for r in conn.execute("SELECT funcname, calls FROM pg_stat_xact_user_functions")}
            per_claim.append({f: c - before.get(f, 0) for f, c in now.items() if c != before.get(f, 0)})
            before = now
        conn.rollback()
    assert per_claim[0].get("fit_candidate") == 1, per_claim[0]
    assert all(set(c) == {"claim_tasks"} for c in per_claim[1:256]), per_claim[1:256]
    assert per_claim[256].get("fit_candidate") == 1, per_claim[256]


def test_fits_dense_at_the_head_are_taken_from_the_head(tq: TaskQueue, dsn: str) -> None:
    """Every task fits 40: the head's read answers (the first fits in claim
    order), in both orders, and one statement of reads serves the claim."""
    ids = tq.enqueue_many([{"payload": {}, "queue": QUEUES[i % 7], "priority": i % 5, "required": i % 41}
                           for i in range(500)])
    got = tq.claim(available=40)
    assert got is not None and got.id == ids[0]
    got = tq.claim(available=40, order="max")
    assert got is not None and got.id == ids[4]
    rest = tq.claim(available=40, order="max")
    assert rest is not None and rest.id == ids[9]
    assert tq.check().ok
