"""A claim over every queue reads one claim order, whatever the number of queues.

Revision ID: 0011
Revises: 0010
Create Date: 2026-11-23

A claim with no queue list (the default of ``claim``, ``claim_many`` and
``peek``; a Worker names its queues) first listed every queue with queued work, a probe per queue, and
then read a 64-row window from each of them and merged the windows. Its cost
grew with the number of queues: on a dense head (every task fits) a claim
ran at 0.37x the naive query with 10 queues and at 0.01x with 2,000.

ix_tasks_claim_any orders the claimable tasks of every queue by (priority,
id). claim_tasks v8 reads it for the steps at the head (H, 0 and 1) when no
queue list is given and the order is ascending, and lists the queues only
when it has to ask the fit buckets, whose indexes are per queue. One more
index entry per task written.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from taskqueue.migrate import load_sql_objects

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None

CLAIMABLE = "state = 'queued' AND NOT parked"


def upgrade() -> None:
    op.create_index("ix_tasks_claim_any", "tasks", ["priority", "id"], postgresql_where=sa.text(CLAIMABLE))
    load_sql_objects(op.get_bind(), "claim_tasks.v8")


def downgrade() -> None:
    load_sql_objects(op.get_bind(), "claim_tasks.v7")
    op.drop_index("ix_tasks_claim_any", table_name="tasks")
