"""The single-column CHECK constraints become domains.

Revision ID: 0017
Revises: 0016
Create Date: 2026-11-24

PostgreSQL 15 reads every CHECK constraint of a table back from its stored
text, and plans it, each time a statement that writes the table starts: a
claim, a completion and a single enqueue each paid for all ten of tasks',
whichever columns they set. Counted under callgrind (``python -m bench
instructions``), that was a third of a claim plus its completion.

A domain's constraints are read once per session and kept in its type
cache, and they are checked only where a value of the domain is assigned,
so an UPDATE that sets ``state`` checks ``state`` and nothing else. The
constraints that tie one column to another (the lease invariants, and
``attempts <= max_attempts``, the half of attempts_in_range that is not
``attempts >= 0``), ``required``'s (a stored generated column
reads it, so its type cannot change) and ``id``'s (an identity column
cannot be a domain) stay table CHECKs.

The domains live in the queue's schema, like its tables. Clients still see
the base types: PostgreSQL describes a domain column by its base type.

The upgrade rewrites no table: the columns change to domains that have no
constraint yet, which needs no rewrite, and each domain's constraint is then
added, which reads the rows once to validate them. Every index on a changed
column is built again, and the invariant views and the pool triggers, which
name those columns, are dropped and made again. waiting_heads v3 casts the
two domain columns it returns to the types it declares, which RETURN QUERY
requires exactly.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from taskqueue.migrate import load_sql_objects

revision = "0017"
down_revision = "0016"
branch_labels = None
depends_on = None

# name, base type, constraint name, its check
DOMAINS = (
    (
        "task_state",
        "text",
        "task_state_known",
        "VALUE IN ('queued', 'scheduled', 'running', 'done', 'failed', 'cancelled')",
    ),
    ("short_name", "text", "short_name_length", "char_length(VALUE) BETWEEN 1 AND 200"),
    ("attempt_limit", "integer", "attempt_limit_positive", "VALUE >= 1"),
    ("attempt_count", "integer", "attempt_count_nonnegative", "VALUE >= 0"),
    ("seconds_estimate", "double precision", "seconds_estimate_finite", "VALUE >= 0 AND VALUE < 'Infinity'"),
    ("pool_count", "integer", "pool_count_nonnegative", "VALUE >= 0"),
)

# table, column, domain, the table CHECK it replaces (name, check)
COLUMNS = (
    (
        "tasks",
        "state",
        "task_state",
        "state_known",
        "state IN ('queued', 'scheduled', 'running', 'done', 'failed', 'cancelled')",
    ),
    ("tasks", "queue", "short_name", "queue_length", "char_length(queue) BETWEEN 1 AND 200"),
    ("tasks", "pool", "short_name", "pool_length", "pool IS NULL OR char_length(pool) BETWEEN 1 AND 200"),
    ("tasks", "max_attempts", "attempt_limit", "max_attempts_positive", "max_attempts >= 1"),
    # Its upper bound ties it to max_attempts, so that half stays a table
    # CHECK of the same name (ATTEMPTS_BOUND below).
    ("tasks", "attempts", "attempt_count", "attempts_in_range", "attempts >= 0 AND attempts <= max_attempts"),
    (
        "tasks",
        "estimate",
        "seconds_estimate",
        "estimate_finite",
        "estimate IS NULL OR (estimate >= 0 AND estimate < 'Infinity')",
    ),
    ("pools", "name", "short_name", "name_length", "char_length(name) BETWEEN 1 AND 200"),
    ("pools", "running", "pool_count", "running_nonnegative", "running >= 0"),
    ("pools", "running_limit", "pool_count", "limit_nonnegative", "running_limit IS NULL OR running_limit >= 0"),
)

ATTEMPTS_BOUND = ("tasks", "attempts_in_range", "attempts <= max_attempts")

# Dependants first; made again in the reverse order.
VIEWS = (
    "invariant_violations",
    "invariant_parked_in_open_pool",
    "invariant_overdue_scheduled",
    "invariant_attempts_exceeded",
    "invariant_finished_with_lease",
    "invariant_running_without_lease",
    "invariant_pool_over_limit",
    "invariant_pool_counts",
)
VIEW_VERSIONS = {"invariant_violations": "v2"}


def _drop_dependants() -> None:
    for view in VIEWS:
        op.execute(sa.text(f"DROP VIEW {view}"))
    op.execute(sa.text("DROP TRIGGER unpark_on_free_slot ON pools"))
    op.execute(sa.text("DROP TRIGGER unpark_on_delete ON pools"))


def _make_dependants() -> None:
    files = [f"{view}.{VIEW_VERSIONS.get(view, 'v1')}" for view in reversed(VIEWS)]
    load_sql_objects(op.get_bind(), "unpark_triggers.v1", *files)


def _base(domain: str) -> str:
    return next(base for name, base, _, _ in DOMAINS if name == domain)


def upgrade() -> None:
    _drop_dependants()
    for name, base, _, _ in DOMAINS:
        op.execute(sa.text(f"CREATE DOMAIN {name} AS {base}"))
    for table in ("tasks", "pools"):
        changes = [
            f"DROP CONSTRAINT ck_{table}_{check}, ALTER COLUMN {column} TYPE {domain}"
            for t, column, domain, check, _ in COLUMNS
            if t == table
        ]
        if table == ATTEMPTS_BOUND[0]:
            changes.append(f"ADD CONSTRAINT ck_{table}_{ATTEMPTS_BOUND[1]} CHECK ({ATTEMPTS_BOUND[2]})")
        op.execute(sa.text(f"ALTER TABLE {table} " + ", ".join(changes)))
    for name, _, constraint, check in DOMAINS:
        op.execute(sa.text(f"ALTER DOMAIN {name} ADD CONSTRAINT {constraint} CHECK ({check})"))
    _make_dependants()
    load_sql_objects(op.get_bind(), "waiting_heads.v3")


def downgrade() -> None:
    _drop_dependants()
    for table in ("tasks", "pools"):
        changes = [f"DROP CONSTRAINT ck_{table}_{ATTEMPTS_BOUND[1]}"] if table == ATTEMPTS_BOUND[0] else []
        changes += [
            f"ALTER COLUMN {column} TYPE {_base(domain)}, ADD CONSTRAINT ck_{table}_{check} CHECK ({expr})"
            for t, column, domain, check, expr in COLUMNS
            if t == table
        ]
        op.execute(sa.text(f"ALTER TABLE {table} " + ", ".join(changes)))
    for name, _, _, _ in DOMAINS:
        op.execute(sa.text(f"DROP DOMAIN {name}"))
    _make_dependants()
    load_sql_objects(op.get_bind(), "waiting_heads.v2")
