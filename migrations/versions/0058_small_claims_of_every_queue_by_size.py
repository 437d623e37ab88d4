"""One task over every queue with less than 64 available is read by exact size.

Revision ID: 0058
Revises: 0057
Create Date: 2026-11-30

claim_tasks v43. Step S took one task over every queue only below 16
available, where one queue's size buckets are exact. Over every queue it reads
ix_tasks_fit_any_exact (required, priority, id), whose sizes are exact
whatever the amount, so it now serves amounts up to 63: one read of each
amount's first (or last) few rows, every one of which fits, however long the
pile of tasks too big for the claim at the head of the order. Only the
function changes.
"""

from __future__ import annotations

from alembic import op

from taskqueue.migrate import load_sql_objects

revision = "0058"
down_revision = "0057"
branch_labels = None
depends_on = None


def upgrade() -> None:
    load_sql_objects(op.get_bind(), "claim_tasks.v43")


def downgrade() -> None:
    load_sql_objects(op.get_bind(), "claim_tasks.v42")
