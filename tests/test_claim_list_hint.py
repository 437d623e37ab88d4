"""A claim over a list of several queues remembers a dry look (claim_tasks v14) and dry own windows (v17).

Over a list, the other queues' tasks stay queued at the head of the shared
order and pile up there, one more each claim. Once that pile outgrew the
look's budget, v13 read the budget twice on every claim (the look, then its
last key) before each listed queue's own window found the task. v14 keeps
the session's dry-look hint for the list as it does for one queue. v17 also
remembers when each listed queue's own window ran dry after the look, and
then skips both for the buckets.
"""

from __future__ import annotations

import hashlib

import psycopg
import pytest

from tests.test_claim_plan import _index_fetches

pytestmark = pytest.mark.slow

LISTED = ["b", "c"]
PILE = 1_000  # other queues' tasks at the head; the look's budget here is 2 queues x 16 rows x class 7 = 224


def _hint(conn: psycopg.Connection) -> str:
    return str(conn.execute("SELECT current_setting('taskqueue.dry_look', true)").fetchone()[0] or "")  # type: ignore[index]


def _small_skip(conn: psycopg.Connection) -> str:
    return str(conn.execute("SELECT current_setting('taskqueue.small_skip', true)").fetchone()[0] or "")  # type: ignore[index]


def _first_fit(conn: psycopg.Connection, available: int, queues: list[str] = LISTED) -> int:
    """The first task in claim order over ``queues`` that fits, by the plain rule."""
    row = conn.execute("SELECT id FROM tasks WHERE state = 'queued' AND required <= %s AND queue = ANY (%s) "
                       "ORDER BY priority, id LIMIT 1", (available, queues)).fetchone()
    assert row is not None
    return int(row[0])


def _claim(conn: psycopg.Connection, available: int, queues: list[str] = LISTED) -> int:
    row = conn.execute("SELECT id FROM claim_tasks(%s, 1, %s, 'w', 60, false)", (available, queues)).fetchone()
    assert row is not None
    return int(row[0])


def _counted(conn: psycopg.Connection, available: int, queues: list[str] = LISTED) -> tuple[int, int]:
    """Claim in a transaction of its own; the id and the rows it fetched by index."""
    with conn.transaction():
        before = _index_fetches(conn)
        got = _claim(conn, available, queues)
        return got, _index_fetches(conn) - before


def _seed(conn: psycopg.Connection) -> None:
    """Queue a's pile at the head of the shared order; b and c behind it, sized 1..100, so that their own
    windows find fits for 90 or more (where their own windows run dry, v17 learns that too: see the last test)."""
    conn.execute(
        "INSERT INTO tasks (queue, payload, priority, required, state, max_attempts) "
        "SELECT 'a', '{}'::jsonb, 1, 10, 'queued', 3 FROM generate_series(1, %s)", (PILE,))
    conn.execute(
        "INSERT INTO tasks (queue, payload, priority, required, state, max_attempts) "
        "SELECT CASE WHEN g % 2 = 0 THEN 'b' ELSE 'c' END, '{}'::jsonb, 2, 1 + (g * 7919) % 100, 'queued', 3 "
        "FROM generate_series(1, 2000) g")
    conn.execute("VACUUM ANALYZE tasks")


def test_a_session_that_saw_a_list_look_run_dry_goes_to_the_listed_queues_at_once(dsn: str) -> None:
    """The first claim's look reads its budget of other queues' tasks and
    finds nothing: the hint is learnt, keyed by the list. The next 15 claims
    of no larger an amount skip the look and cost fewer buffers; every one
    still takes the first task in claim order that fits, even one enqueued
    ahead of the pile. A claim over another list does not use the hint."""
    key = "md5:" + hashlib.md5(b"{b,c}").hexdigest()
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("SELECT set_config('search_path', 'taskqueue', false)")
        _seed(conn)

        assert _hint(conn) == ""
        for _ in range(2):  # the same list in another order is another key: warms both paths' plans
            expected = _first_fit(conn, 100, ["c", "b"])
            assert _claim(conn, 100, ["c", "b"]) == expected
        assert _hint(conn).startswith("100:1:md5:") and not _hint(conn).endswith(key)
        expected = _first_fit(conn, 100, LISTED)
        got, dry = _counted(conn, 100, LISTED)
        assert got == expected
        assert _hint(conn) == f"100:0:{key}"  # the look ran dry past 224 rows of queue a: learnt
        expected = _first_fit(conn, 100, LISTED)
        got, skipped = _counted(conn, 100, LISTED)
        assert got == expected
        assert _hint(conn) == f"100:1:{key}"
        assert dry >= 224, f"a dry look fetched {dry} rows"
        assert skipped < 64, f"a skipped look fetched {skipped} rows, a dry one {dry}"
        for n in range(2, 16):
            if n == 8:
                conn.execute("INSERT INTO tasks (queue, payload, priority, required, state, max_attempts) "
                             "VALUES ('c', '{}', 0, 10, 'queued', 3)")
            expected = _first_fit(conn, 90, LISTED)
            assert _claim(conn, 90, LISTED) == expected  # skipped, still exact (and the task ahead of the pile first)
            assert _hint(conn) == f"100:{n}:{key}"
        expected = _first_fit(conn, 100, LISTED)
        assert _claim(conn, 100, LISTED) == expected  # the 16th looks again: still dry, learnt again
        assert _hint(conn) == f"100:0:{key}"
        expected = _first_fit(conn, 100, ["a", "b"])
        # another list: its look finds queue a's head, the hint is cleared
        assert _claim(conn, 100, ["a", "b"]) == expected
        assert _hint(conn) == ""


def test_below_sixteen_left_a_list_learns_the_hint_and_then_asks_the_buckets_at_once(dsn: str) -> None:
    """Below 16 left every bucket fits whole, so after a dry look (the pile
    of queue a, longer than the look's budget) the next claims over the list
    go to the buckets at once (claim_tasks v30; before, each read the look's
    whole budget in vain): the hint is learnt and counted, each claim reads
    far fewer rows, and each still takes the first task in claim order that
    fits, one enqueued ahead of the pile included. The first of them tries
    step L (v31), which finds queue a's small tasks ahead of the list's in
    every bucket and switches itself off for the session's next 99 small
    claims."""
    key = "md5:" + hashlib.md5(b"{b,c}").hexdigest()
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("SELECT set_config('search_path', 'taskqueue', false)")
        _seed(conn)

        expected = _first_fit(conn, 12)
        got, dry = _counted(conn, 12)
        assert got == expected
        assert _hint(conn) == f"12:0:{key}"
        for n in range(1, 5):
            if n == 3:
                conn.execute("INSERT INTO tasks (queue, payload, priority, required, state, max_attempts) "
                             "VALUES ('c', '{}', 0, 7, 'queued', 3)")
            expected = _first_fit(conn, 12)
            got, skipped = _counted(conn, 12)
            assert got == expected
            assert _hint(conn) == f"12:{n}:{key}"
            if n == 1:
                # Step L (v31) reads every queue's small buckets first, which
                # queue a's tasks fill ahead of the list's: none of the list's
                # before its cut, so the session skips it for 99 small claims.
                assert _small_skip(conn) == "99"
            else:
                assert skipped * 2 < dry, f"a skipped look fetched {skipped} rows, a dry one {dry}"


def test_claims_over_a_list_with_piles_in_each_queue_stay_exact(dsn: str) -> None:
    """The hint over a list: queue a piles up at the head of the shared
    order, and each listed queue has a pile of its own of tasks too big, of
    varied lengths (some longer than the listed queues' own windows).
    Every claim, skipped look or not, takes exactly the task the naive query
    names, while tasks are enqueued ahead of the piles now and then."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("SELECT set_config('search_path', 'taskqueue', false)")
        conn.execute(
            "INSERT INTO tasks (queue, payload, priority, required, state, max_attempts) "
            "SELECT 'a', '{}'::jsonb, 1, 10, 'queued', 3 FROM generate_series(1, 600)")
        # per listed queue: a pile of tasks too big (20, 60, 150, 300 long), then sizes 1..200
        conn.execute(
            "INSERT INTO tasks (queue, payload, priority, required, state, max_attempts) "
            "SELECT q, '{}'::jsonb, 1, 5000, 'queued', 3 "
            "FROM (VALUES ('b', 20), ('c', 60), ('d', 150), ('e', 300)) v(q, pile), generate_series(1, 300) g "
            "WHERE g <= v.pile")
        conn.execute(
            "INSERT INTO tasks (queue, payload, priority, required, state, max_attempts) "
            "SELECT (ARRAY['b','c','d','e'])[1 + g % 4], '{}'::jsonb, 1 + g % 3, 1 + (g * 7919) % 200, 'queued', 3 "
            "FROM generate_series(1, 3000) g")
        conn.execute("VACUUM ANALYZE tasks")
        listed = ["b", "c", "d", "e"]
        skipped = 0
        for n in range(300):
            available = 16 + (n * 37) % 185
            if n % 50 == 25:
                conn.execute("INSERT INTO tasks (queue, payload, priority, required, state, max_attempts) "
                             "VALUES (%s, '{}', 0, 17, 'queued', 3)", (listed[n % 4],))
            expected = conn.execute(
                "SELECT id FROM tasks WHERE state = 'queued' AND required <= %s AND queue = ANY (%s) "
                "ORDER BY priority, id LIMIT 1", (available, listed)).fetchone()
            hint = str(conn.execute("SELECT current_setting('taskqueue.dry_look', true)").fetchone()[0] or "")
            got = conn.execute("SELECT id FROM claim_tasks(%s, 1, %s, 'w', 60, false)", (available, listed)).fetchone()
            assert got == expected, (n, available)
            after = str(conn.execute("SELECT current_setting('taskqueue.dry_look', true)").fetchone()[0] or "")
            skipped += after.split(":")[1:2] not in ([], ["0"]) and after != hint
        assert skipped > 100, f"only {skipped} of 300 claims skipped the shared look"



def test_a_list_whose_own_windows_ran_dry_goes_to_the_buckets_at_once(dsn: str) -> None:
    """claim_tasks v17. Each listed queue's head holds 50 tasks too big, more
    than its own 8-row window: the first claim's look and windows both run
    dry, and the hint's key becomes 'own:'. The next 15 claims skip both and
    ask the buckets, fetching fewer rows; each still takes the first task in
    claim order that fits, even one enqueued ahead of the piles."""
    key = "own:" + hashlib.md5(b"{b,c}").hexdigest()
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("SELECT set_config('search_path', 'taskqueue', false)")
        conn.execute(
            "INSERT INTO tasks (queue, payload, priority, required, state, max_attempts) "
            "SELECT 'a', '{}'::jsonb, 1, 10, 'queued', 3 FROM generate_series(1, %s)", (PILE,))
        conn.execute(
            "INSERT INTO tasks (queue, payload, priority, required, state, max_attempts) "
            "SELECT q, '{}'::jsonb, 1, 5000, 'queued', 3 FROM unnest(ARRAY['b', 'c']) q, generate_series(1, 50)")
        conn.execute(
            "INSERT INTO tasks (queue, payload, priority, required, state, max_attempts) "
            "SELECT CASE WHEN g % 2 = 0 THEN 'b' ELSE 'c' END, '{}'::jsonb, 2, 1 + (g * 7919) % 200, 'queued', 3 "
            "FROM generate_series(1, 2000) g")
        conn.execute("VACUUM ANALYZE tasks")

        for _ in range(2):  # warms the plans
            conn.execute("SELECT id FROM claim_tasks(100, 1, '{c,b}', 'w', 60, false)")
        expected = _first_fit(conn, 100)
        got, dry = _counted(conn, 100)
        assert got == expected
        assert _hint(conn) == f"100:0:{key}"  # the look and both queues' windows ran dry: learnt
        expected = _first_fit(conn, 100)
        got, skipped = _counted(conn, 100)
        assert got == expected
        assert _hint(conn) == f"100:1:{key}"
        assert skipped < dry - 200, f"a skipped claim fetched {skipped} rows, a dry one {dry}"
        for n in range(2, 16):
            if n == 8:
                conn.execute("INSERT INTO tasks (queue, payload, priority, required, state, max_attempts) "
                             "VALUES ('b', '{}', 0, 10, 'queued', 3)")
            expected = _first_fit(conn, 90)
            assert _counted(conn, 90)[0] == expected  # skipped, still exact (and the task ahead of the piles first)
            assert _hint(conn) == f"100:{n}:{key}"
        expected = _first_fit(conn, 100)
        assert _counted(conn, 100)[0] == expected  # the 16th looks again: still dry, learnt again
        assert _hint(conn) == f"100:0:{key}"
        got = conn.execute("SELECT id FROM claim_tasks(101, 1, %s, 'w', 60, false)", (LISTED,)).fetchone()
        assert got is not None and _hint(conn) == f"101:0:{key}"  # a larger amount looks again (and learns again)


def test_a_small_listed_claim_whose_row_is_held_reads_on_from_it_not_the_buckets_again(dsn: str) -> None:
    """The buckets' answer is locked by another session: the claim takes the
    next fit in claim order from the shared window after that row, asking
    fit_candidate once (claim_tasks v30; v29 asked it again from that row,
    and with 8 consumers sent to the same row, 3.3 times a claim)."""
    from tests.test_claim_plan import _calls_in_transaction

    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("SELECT set_config('search_path', 'taskqueue', false)")
        _seed(conn)
        fits = [int(r[0]) for r in conn.execute(
            "SELECT id FROM tasks WHERE state = 'queued' AND required <= 12 AND queue = ANY (%s) "
            "ORDER BY priority, id LIMIT 2", (LISTED,)).fetchall()]
    with psycopg.connect(dsn) as other, psycopg.connect(dsn) as conn:
        other.execute("SELECT id FROM taskqueue.tasks WHERE id = %s FOR UPDATE", (fits[0],))
        conn.execute("SELECT set_config('search_path', 'taskqueue', false)")
        conn.commit()
        ids, calls = _calls_in_transaction(conn, f"SELECT id FROM claim_tasks(12, 1, ARRAY{LISTED!r}, 'w', 60, false)")
        other.rollback()
    assert ids == [fits[1]]
    assert calls.get("fit_candidate") == 1, calls
