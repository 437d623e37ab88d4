"""A descending claim of one task over a list of queues looks first (claim_tasks v22).

With a list of several queues and order="max", v21 merged a window of each
listed queue for every claim: over 40 queues of which a consumer lists 20,
with half the tasks fitting, 0.33x the naive query over its (priority DESC,
id) index at 200,000 tasks. v22 first reads the order over every queue and
keeps the listed queues' rows, as an ascending list's look does; a look
that runs dry asks the list's buckets and looks again from their find, and
the session's next claims over that list ask the buckets at once for a
while. It must
still take exactly what the plain rule takes (tests/test_claim_exact.py's
reference): piles of other queues' tasks and of tasks too big, rows locked
elsewhere, pools full and open.
"""

from __future__ import annotations

import random

import psycopg
import pytest

from taskqueue import TaskQueue
from tests.test_claim_exact import single_claims_match_the_reference
from tests.test_claim_plan import _calls_in_transaction, third_run

QUEUES = [f"q{i:02d}" for i in range(40)]
LISTED = QUEUES[:20]


@pytest.mark.parametrize("seed", range(4))
def test_descending_claims_over_a_list_match_the_reference(tq: TaskQueue, dsn: str, seed: int) -> None:
    """A pile of too-big tasks and of unlisted queues' tasks at the best
    priority (short, around the look's budget, or well past it), then tasks
    of every size; some of the first fits locked elsewhere."""
    rng = random.Random(4200 + seed)
    pile = rng.choice((30, 900, 3000))
    specs: list[dict[str, object]] = []
    for _ in range(pile):  # the pile: listed queues' tasks too big, unlisted queues' of any size
        queue = rng.choice(QUEUES)
        specs.append({"payload": {}, "queue": queue, "priority": 50,
                      "required": 600_000 if queue in LISTED else rng.choice((1, 600_000))})
    specs += [
        {"payload": {}, "queue": rng.choice(QUEUES),
         "priority": rng.randint(0, 49) if rng.random() < 0.7 else rng.randint(0, 100_000) - 100_000,
         "required": rng.choice((1, 16, 40, 499_999, 500_000, 500_001, 900_000)),
         "pool": rng.choice((None, None, None, "p0", "p1"))}
        for _ in range(500)
    ]
    tq.enqueue_many(specs)
    tq.set_pool_limit("p0", 0)
    tq.set_pool_limit("p1", 3)
    single_claims_match_the_reference(
        tq, dsn, rng, lambda: rng.choice((None, 1, 9, 15, 16, 50, 500_000, 500_000)),
        lambda: rng.choice((LISTED, LISTED, QUEUES[15:17], QUEUES[:39])), "max",
        lock_among=30, lock_share=0.4, steps=30, label=f"pile={pile}")


def _seed(conn: psycopg.Connection, dsn: str) -> None:
    """40 queues, 20,000 tasks, priorities 0..9, sizes 1..100 (half fit 50)."""
    conn.execute("SELECT set_config('search_path', 'taskqueue', false)")
    conn.execute(
        "INSERT INTO tasks (queue, payload, priority, required, state, max_attempts) "
        "SELECT 'q' || lpad(((g * 17) % 40)::text, 2, '0'), '{}'::jsonb, (g * 31) % 10, 1 + (g * 7919) % 100, "
        "'queued', 3 FROM generate_series(1, 20000) g")
    conn.commit()
    with psycopg.connect(dsn, autocommit=True) as vac:
        vac.execute("VACUUM ANALYZE taskqueue.tasks")


@pytest.mark.parametrize(("available", "bound"), [(50, 120), (9, 200)])
def test_a_descending_claim_over_a_list_reads_the_head_once(dsn: str, available: int, bound: int) -> None:
    """One claim over 20 of 40 queues reads the head of the order over every
    queue and asks no bucket: v21 merged a window of each of the 20 queues
    (1,000 buffers and more). Below 16 available (9) too: before version 36
    each such claim asked fit_candidate, a probe per listed queue and level."""
    with psycopg.connect(dsn) as conn:
        _seed(conn, dsn)
        listed = "ARRAY[" + ",".join(f"'{q}'" for q in LISTED) + "]"
        expected = conn.execute(
            f"SELECT id FROM tasks WHERE state = 'queued' AND required <= %s AND queue = ANY ({listed}) "
            "ORDER BY priority DESC, id LIMIT 1", (available,)).fetchone()
        sql = f"SELECT * FROM claim_tasks({available}, 1, {listed}, 'w', 60, true)"
        buffers, rows, got = third_run(conn, sql)
        ids, calls = _calls_in_transaction(conn, sql.replace("*", "id"))
    assert expected is not None and got == [expected[0]] and ids == got
    assert rows == 1
    assert "fit_candidate" not in calls, calls
    assert buffers < bound, f"{buffers} buffers for a descending claim of {available} over a list of 20 queues"
