"""The head schema is one thing, however it was reached.

Built two ways: by upgrading one revision at a time with rows in the tables
at every step, and by migrating a fresh database in one go. The two must
agree on every object a migration can touch: tables, columns, constraints,
domains, indexes, functions (their full text), views, triggers, comments and storage
options. ``compare_metadata`` only sees what the models declare; functions,
views and triggers are covered here. Every downgrade must also restore the
previous revision's schema exactly (it loads version N of each function).
"""

from __future__ import annotations

from typing import Any

import psycopg
import pytest
from alembic.script import ScriptDirectory

from taskqueue import TaskQueue
from taskqueue.migrate import alembic_config, downgrade, upgrade

SCHEMA = "taskqueue"

CATALOG: dict[str, str] = {
    "columns": """
        SELECT c.relname, a.attname, format_type(a.atttypid, a.atttypmod), a.attnotnull,
               pg_get_expr(d.adbin, d.adrelid), a.attidentity, col_description(c.oid, a.attnum)
          FROM pg_attribute a
          JOIN pg_class c ON c.oid = a.attrelid
          JOIN pg_namespace n ON n.oid = c.relnamespace
          LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
         WHERE n.nspname = %(s)s AND c.relkind IN ('r', 'v', 'p') AND a.attnum > 0 AND NOT a.attisdropped
         ORDER BY c.relname, a.attname""",
    "relations": """
        SELECT c.relname, c.relkind, obj_description(c.oid, 'pg_class'), c.reloptions
          FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
         WHERE n.nspname = %(s)s AND c.relkind IN ('r', 'v', 'p', 'i', 'S')
         ORDER BY c.relname""",
    "constraints": """
        SELECT c.relname, k.conname, pg_get_constraintdef(k.oid), obj_description(k.oid, 'pg_constraint')
          FROM pg_constraint k
          JOIN pg_class c ON c.oid = k.conrelid
          JOIN pg_namespace n ON n.oid = c.relnamespace
         WHERE n.nspname = %(s)s
         ORDER BY c.relname, k.conname""",
    "domains": """
        SELECT t.typname, format_type(t.typbasetype, t.typtypmod), t.typnotnull, k.conname,
               pg_get_constraintdef(k.oid)
          FROM pg_type t
          JOIN pg_namespace n ON n.oid = t.typnamespace
          LEFT JOIN pg_constraint k ON k.contypid = t.oid
         WHERE n.nspname = %(s)s AND t.typtype = 'd'
         ORDER BY 1, 4""",
    "indexes": "SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = %(s)s ORDER BY indexname",
    "functions": """
        SELECT p.proname, pg_get_function_identity_arguments(p.oid), pg_get_functiondef(p.oid),
               obj_description(p.oid, 'pg_proc')
          FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
         WHERE n.nspname = %(s)s
         ORDER BY 1, 2""",
    "views": """
        SELECT viewname, pg_get_viewdef(format('%%I.%%I', schemaname, viewname)::regclass, true)
          FROM pg_views WHERE schemaname = %(s)s ORDER BY viewname""",
    "triggers": """
        SELECT c.relname, t.tgname, pg_get_triggerdef(t.oid), t.tgenabled
          FROM pg_trigger t
          JOIN pg_class c ON c.oid = t.tgrelid
          JOIN pg_namespace n ON n.oid = c.relnamespace
         WHERE n.nspname = %(s)s AND NOT t.tgisinternal
         ORDER BY 1, 2""",
}


def snapshot(dsn: str) -> dict[str, list[tuple[Any, ...]]]:
    with psycopg.connect(dsn) as conn:
        return {kind: conn.execute(query, {"s": SCHEMA}).fetchall() for kind, query in CATALOG.items()}


def revisions() -> list[str]:
    script = ScriptDirectory.from_config(alembic_config(None, SCHEMA))
    return [rev.revision for rev in reversed(list(script.walk_revisions("base", "heads")))]


def add_rows(dsn: str, step: int) -> None:
    """Rows every revision's schema accepts: a backlog in several states and a full pool."""
    with psycopg.connect(dsn) as conn:
        conn.execute(f"SET search_path TO {SCHEMA}")
        conn.execute(
            "INSERT INTO pools (name, running_limit) VALUES (%s, 0) ON CONFLICT (name) DO NOTHING", (f"p{step}",)
        )
        conn.execute(
            """INSERT INTO tasks (queue, payload, priority, required, pool, state, max_attempts, run_at, finished_at)
               SELECT 'q' || (g %% 3), jsonb_build_object('step', %s, 'n', g), g %% 7 - 3, (g * 7919) %% 5000,
                      CASE WHEN g %% 4 = 0 THEN %s END,
                      (ARRAY['queued', 'scheduled', 'done', 'failed', 'cancelled'])[1 + g %% 5], 3,
                      CASE WHEN g %% 5 = 1 THEN now() + interval '1 hour' ELSE now() END,
                      CASE WHEN g %% 5 >= 2 THEN now() END
                 FROM generate_series(1, 200) g""",
            (step, f"p{step}"),
        )


def count_rows(dsn: str) -> int:
    with psycopg.connect(dsn) as conn:
        row = conn.execute(f"SELECT count(*) FROM {SCHEMA}.tasks").fetchone()
    assert row is not None
    return int(row[0])


def migrate_to(dsn: str, revision: str) -> None:
    with TaskQueue(dsn) as tq:
        upgrade(tq.engine, SCHEMA, revision)


@pytest.mark.slow
def test_stepwise_upgrade_with_rows_equals_fresh_build(empty_dsn: str, dsn: str) -> None:
    steps = revisions()
    assert len(steps) >= 3
    for step, revision in enumerate(steps):
        migrate_to(empty_dsn, revision)
        add_rows(empty_dsn, step)
    assert count_rows(empty_dsn) == 200 * len(steps)
    stepwise, fresh = snapshot(empty_dsn), snapshot(dsn)
    for kind in CATALOG:
        assert stepwise[kind] == fresh[kind], kind
    assert fresh["functions"], "the head schema has functions to compare"
    assert fresh["views"] and fresh["triggers"]


@pytest.mark.slow
def test_every_downgrade_restores_the_previous_schema(empty_dsn: str) -> None:
    steps = revisions()
    migrate_to(empty_dsn, steps[0])
    add_rows(empty_dsn, 0)
    for step, (before, after) in enumerate(zip(steps, steps[1:]), start=1):
        expected = snapshot(empty_dsn)
        migrate_to(empty_dsn, after)
        add_rows(empty_dsn, step)
        with TaskQueue(empty_dsn) as tq:
            downgrade(tq.engine, SCHEMA, before)
        assert snapshot(empty_dsn) == expected, f"downgrade {after} -> {before}"
        migrate_to(empty_dsn, after)


def test_snapshot_sees_a_changed_function_body(dsn: str) -> None:
    """The comparison is not vacuous: a hand edit of one function shows."""
    before = snapshot(dsn)
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("COMMENT ON FUNCTION taskqueue.take_pool_slot(text, text[]) IS 'edited'")
    after = snapshot(dsn)
    assert before["functions"] != after["functions"]
    assert before["columns"] == after["columns"]
