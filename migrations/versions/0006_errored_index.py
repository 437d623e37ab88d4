"""An index of the failures, for the dashboard's failures page and the failed counts.

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-23

Partial, so it holds failed tasks and waiting tasks that failed an attempt
and will retry, and nothing else: an enqueue of a fresh task, and the
finished history, never touch it. The updates that move a task into or out
of it (claim, fail, retry) already change indexed columns, so it costs no
HOT update either. Its key starts with state, queue and priority, so the
failed counts of the overview and the metrics are an index-only scan.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None

#: The same text as the WHERE of failure_groups in taskqueue/sql/dashboard.sql,
#: so the planner can prove the index covers those queries.
ERRORED = "state = 'failed' OR (error IS NOT NULL AND state IN ('queued', 'scheduled') AND attempts > 0)"


def upgrade() -> None:
    op.create_index("ix_tasks_errored", "tasks", ["state", "queue", "priority", "id"], postgresql_where=sa.text(ERRORED))


def downgrade() -> None:
    op.drop_index("ix_tasks_errored", table_name="tasks")
