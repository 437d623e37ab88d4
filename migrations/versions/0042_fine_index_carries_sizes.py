"""The fine fit index carries each row's size and pool, so the boundary walk reads no table row.

Revision ID: 0042
Revises: 0041
Create Date: 2026-11-28

ix_tasks_fit_fine, (queue, required_fine(required), priority, id), now
INCLUDEs required and pool. fit_candidate v10 walks the fine bucket that
holds what is available + 1 in claim order and tests each row's size and
pool: with both in the index that walk is an index-only scan wherever the
visibility map says the page is all-visible, where before each row read
its table row. fit_candidate v10 also reads the boundary with scalar
aggregates (no array per row, no sort of the rows read) and gives the scan
of the fitting sizes as many rows a turn as the walk. Measured where the
boundary's fitting and too-big rows are about as many and every size is its
own (bytes_falling, docs/performance.md).

The index is built again under its own name, in one transaction with the
function, so no claim runs between the two.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from taskqueue.migrate import load_sql_objects

revision = "0042"
down_revision = "0041"
branch_labels = None
depends_on = None

CLAIMABLE = "state = 'queued' AND NOT parked"
COLUMNS = ["queue", sa.text("required_fine(required)"), "priority", "id"]


def upgrade() -> None:
    op.drop_index("ix_tasks_fit_fine", table_name="tasks")
    op.create_index(
        "ix_tasks_fit_fine", "tasks", COLUMNS, postgresql_where=sa.text(CLAIMABLE),
        postgresql_include=["required", "pool"],
    )
    load_sql_objects(op.get_bind(), "fit_candidate.v10")


def downgrade() -> None:
    load_sql_objects(op.get_bind(), "fit_candidate.v9")
    op.drop_index("ix_tasks_fit_fine", table_name="tasks")
    op.create_index("ix_tasks_fit_fine", "tasks", COLUMNS, postgresql_where=sa.text(CLAIMABLE))
