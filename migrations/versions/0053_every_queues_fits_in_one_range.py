"""Over every queue, few fits are read in one range of an index without the queue column.

Revision ID: 0053
Revises: 0052
Create Date: 2026-11-29

few_fits v2, fit_candidate v14, claim_tasks v38. few_fits v1 read the fits of every queue queue
by queue: it listed the queues first (one descent each, about 1 ms for 100)
and read each one's range of ix_tasks_fit_exact, and over more than 128
queues it did not read at all, so over 1,000 queues with 0.05% of the
tasks fitting each claim read every queue's range again in fit_candidate
(9.7 claims a second at 1M tasks, queues_mb_rare). A new index, ix_tasks_fit_any_exact (required, priority,
id) over every queue's claimable tasks, holds those fits in one range. It is
one more index entry for each task enqueued (or put back) that needs 16 or
more, none for a claim or a completion.

claim_tasks v38 and fit_candidate v14 also read it, by required, for the
probes over every queue with less than 16 left, where they read
ix_tasks_fit_small_any (bucket, priority, id) over the tasks needing less
than 16: below 16 the bucket is the amount, so the rows and their order are
the same. That index is dropped, so a task needing little (every task that
names no size) still pays one index entry there, not two.

Building the index on a large table blocks writes while it builds, as any
CREATE INDEX does.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from taskqueue.migrate import load_sql_objects

revision = "0053"
down_revision = "0052"
branch_labels = None
depends_on = None

CLAIMABLE_ANY = "state = 'queued' AND NOT parked AND id > 0"


def upgrade() -> None:
    op.create_index(
        "ix_tasks_fit_any_exact", "tasks", ["required", "priority", "id"], postgresql_where=sa.text(CLAIMABLE_ANY)
    )
    load_sql_objects(op.get_bind(), "few_fits.v2", "fit_candidate.v14", "claim_tasks.v38")
    op.drop_index("ix_tasks_fit_small_any", table_name="tasks")


def downgrade() -> None:
    op.create_index(
        "ix_tasks_fit_small_any", "tasks", ["bucket", "priority", "id"],
        postgresql_where=sa.text(CLAIMABLE_ANY + " AND bucket < 16"),
    )
    load_sql_objects(op.get_bind(), "claim_tasks.v37", "fit_candidate.v13", "few_fits.v1")
    op.drop_index("ix_tasks_fit_any_exact", table_name="tasks")
