"""The claim's boundary bucket in fine buckets, and walks that end where they should.

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-23

fit_candidate v1 searched the bucket holding ``available`` by walking it in
claim order and visiting its distinct fitting values. When sizes fall as ids
grow, both are long: the bucket's tasks that do not fit come first, and its
fitting sizes are many and distinct. Version 2 splits that bucket into 64
fine buckets (required_fine, 256 per doubling), reads each whole one in one
probe of ix_tasks_fit_fine, and searches only the one that holds
``available``. It also bounds every walk by LIMIT alone: PostgreSQL 15 does
not end an index scan on the upper row comparison ``(priority, id) < (a, b)``
when id decides it, so version 1's walks read to the end of a priority.

required_bucket v2 gives the same buckets for a tenth of the cost of each
row written (no bit-string conversion, and inlined).

claim_tasks v4 skips its head window when what is left is below 16: the
buckets are exact there, so at most 16 probes answer it, for less than the
window's 256 rows.

The index is on an expression, so no table is rewritten; it is built like
any other index (``CREATE INDEX``, which blocks writes while it builds).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from taskqueue.migrate import load_sql_objects

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None

CLAIMABLE = "state = 'queued' AND NOT parked"


def upgrade() -> None:
    load_sql_objects(op.get_bind(), "required_bucket.v2", "required_fine.v1")
    op.create_index(
        "ix_tasks_fit_fine",
        "tasks",
        ["queue", sa.text("required_fine(required)"), "priority", "id"],
        postgresql_where=sa.text(CLAIMABLE),
    )
    load_sql_objects(op.get_bind(), "fit_candidate.v2", "claim_tasks.v4")


def downgrade() -> None:
    load_sql_objects(op.get_bind(), "claim_tasks.v3", "fit_candidate.v1")
    op.drop_index("ix_tasks_fit_fine", table_name="tasks")
    op.execute(sa.text("DROP FUNCTION required_fine(integer)"))
    load_sql_objects(op.get_bind(), "required_bucket.v1")
