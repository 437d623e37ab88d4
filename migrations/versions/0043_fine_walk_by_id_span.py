"""The boundary walk takes a span of ids a turn, over a fine index that carries each task's size and pool.

Revision ID: 0043
Revises: 0042
Create Date: 2026-11-28

fit_candidate v11 walks the fine bucket that holds what is available + 1, in
the best's own priority, a span of ids a turn with a filter, where version 10
counted a window of rows with aggregates (about twice the cost a row).
ix_tasks_fit_fine gains INCLUDE (required, pool), so that walk and the fine
probes answer from the index, and a predicate term only fit_candidate's fine
statements state (lease_token IS NULL, true of every queued task), so that no
other statement of the claim is planned on the wider index. See
docs/performance.md, "the boundary walked by spans of ids (migration 0043)".
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from taskqueue.migrate import load_sql_objects

revision = "0043"
down_revision = "0042"
branch_labels = None
depends_on = None

CLAIMABLE = "state = 'queued' AND NOT parked"


def upgrade() -> None:
    op.drop_index("ix_tasks_fit_fine", table_name="tasks")
    op.create_index(
        "ix_tasks_fit_fine",
        "tasks",
        ["queue", sa.text("required_fine(required)"), "priority", "id"],
        postgresql_include=["required", "pool"],
        postgresql_where=sa.text(CLAIMABLE + " AND lease_token IS NULL"),
    )
    load_sql_objects(op.get_bind(), "fit_candidate.v11")


def downgrade() -> None:
    load_sql_objects(op.get_bind(), "fit_candidate.v10")
    op.drop_index("ix_tasks_fit_fine", table_name="tasks")
    op.create_index(
        "ix_tasks_fit_fine",
        "tasks",
        ["queue", sa.text("required_fine(required)"), "priority", "id"],
        postgresql_where=sa.text(CLAIMABLE),
    )
