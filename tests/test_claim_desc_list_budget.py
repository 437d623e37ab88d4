"""A descending look over a list walks 64 rows a listed queue for each class (claim_tasks v45).

Descending, the buckets ask two probes a level, so the look's budget of 16
rows a queue and class (the ascending figure) sent claims to the buckets
while walking on would have cost less: on the eleventh random draw's r20 (20
of 40 queues listed, one priority, 146 available) the tasks too big piled up
at the head, the look ran dry at 2,560 rows, and each later claim cost about
4 ms in the buckets. Over 20 listed queues with 50 available (6 classes) the
budget is now 20 * 64 * 6 = 7,680 rows. Claims must still take what the plain
rule takes (tests/test_claim_exact.py's reference), past the budget too.
"""

from __future__ import annotations

import random

import psycopg
import pytest

from taskqueue import TaskQueue
from tests.test_claim_exact import single_claims_match_the_reference

pytestmark = pytest.mark.slow

QUEUES = [f"q{i:02d}" for i in range(40)]
LISTED = QUEUES[:20]
BUDGET = 20 * 64 * 6


def _seed(conn: psycopg.Connection, pile: int) -> int:
    """At priority 50, ``pile`` rows no claim of 50 over LISTED can take (the
    listed queues' too big, the others' of any size); behind them, at
    priority 10, one task that fits. Returns its id."""
    conn.execute(
        "INSERT INTO tasks (queue, payload, priority, required, state, max_attempts) "
        "SELECT 'q' || lpad((g %% 40)::text, 2, '0'), '{}'::jsonb, 50, "
        "CASE WHEN g %% 40 < 20 THEN 60 + g %% 1000 ELSE 1 + g %% 100 END, 'queued', 3 "
        "FROM generate_series(1, %s) g", (pile,))
    row = conn.execute(
        "INSERT INTO tasks (queue, payload, priority, required, state, max_attempts) "
        "VALUES ('q07', '{}'::jsonb, 10, 50, 'queued', 3) RETURNING id").fetchone()
    assert row is not None
    conn.execute("VACUUM ANALYZE tasks")
    return int(row[0])


def _claim(conn: psycopg.Connection) -> int | None:
    row = conn.execute("SELECT id FROM claim_tasks(50, 1, %s, 'w', 60, true)", (LISTED,)).fetchone()
    return None if row is None else int(row[0])


def _hint(conn: psycopg.Connection) -> str:
    return str(conn.execute("SELECT current_setting('taskqueue.dry_look', true)").fetchone()[0] or "")


@pytest.mark.parametrize(("pile", "dry"), [(5_000, False), (BUDGET - 8, False), (BUDGET + 500, True)])
def test_the_look_walks_a_pile_within_its_budget(dsn: str, pile: int, dry: bool) -> None:
    """A pile of 5,000 rows ran a version 44 look dry (1,920 rows); now the
    look finds the fit behind it and learns nothing. Past 7,680 rows the look
    runs dry and says so for the session's next claims over the list. The
    answer is the same task either way."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("SELECT set_config('search_path', 'taskqueue', false)")
        fit = _seed(conn, pile)
        assert _claim(conn) == fit
        hint = _hint(conn)
        if dry:
            assert hint.startswith("50:0:dmd5:"), hint
        else:
            assert hint == ""


@pytest.mark.parametrize("seed", range(3))
def test_descending_claims_over_a_list_with_long_piles_match_the_reference(
    tq: TaskQueue, dsn: str, seed: int
) -> None:
    """Piles between the old budget and the new one, and past the new one,
    then tasks of every size and priority; some fits locked elsewhere, pools
    full and open."""
    rng = random.Random(4500 + seed)
    pile = (4_000, 9_000, 4_000)[seed]
    specs: list[dict[str, object]] = []
    for _ in range(pile):
        queue = rng.choice(QUEUES)
        specs.append({"payload": {}, "queue": queue, "priority": 50,
                      "required": rng.choice((51, 146, 600)) if queue in LISTED else rng.choice((1, 600))})
    specs += [
        {"payload": {}, "queue": rng.choice(QUEUES),
         "priority": rng.choice((50, 50, rng.randint(0, 49))),
         "required": rng.choice((0, 1, 16, 50, 146, 147, 600)),
         "pool": rng.choice((None, None, None, "p0", "p1"))}
        for _ in range(400)
    ]
    tq.enqueue_many(specs)
    tq.set_pool_limit("p0", 0)
    tq.set_pool_limit("p1", 3)
    single_claims_match_the_reference(
        tq, dsn, rng, lambda: rng.choice((50, 50, 146, 9, 600)),
        lambda: rng.choice((LISTED, LISTED, QUEUES[15:17])), "max",
        lock_among=30, lock_share=0.4, steps=30, label=f"pile={pile}")
