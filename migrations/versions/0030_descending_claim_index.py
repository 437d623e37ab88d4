"""A descending claim over every queue walks its own index; a descending list looks first.

Revision ID: 0030
Revises: 0029
Create Date: 2026-11-26

claim_tasks v22: a claim with no queue list in order="max" found each
priority below the current one with its own descent of ix_tasks_claim_any
(priority, id), then read that priority's rows with another. Where every
task has its own priority (deadlines, scores), that is two descents for
every row read: over 1,000 queues with sizes in MB, 0.10x the naive query at
200,000 tasks. A new index, ix_tasks_claim_desc (priority DESC, id) over
every queue's claimable tasks, gives that order as one plain walk, as
ix_tasks_claim_any gives the ascending one. It is one more index entry for
each task enqueued (or put back), none for a claim or a completion.

A claim of one task over a list of several queues in order="max" merged a
window of each listed queue (0.33x the naive query over 20 of 40 queues
with half the tasks fitting). It now looks first along the order over
every queue, keeping the listed queues' rows, as an ascending list's claim
does; a dry look asks the list's buckets and looks again from their find.

Building the index on a large table blocks writes while it builds, as any
CREATE INDEX does.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from taskqueue.migrate import load_sql_objects

revision = "0030"
down_revision = "0029"
branch_labels = None
depends_on = None


CLAIMABLE_ANY = "state = 'queued' AND NOT parked AND id > 0"


def upgrade() -> None:
    op.create_index(
        "ix_tasks_claim_desc", "tasks", [sa.text("priority DESC"), "id"], postgresql_where=sa.text(CLAIMABLE_ANY)
    )
    load_sql_objects(op.get_bind(), "claim_tasks.v22")


def downgrade() -> None:
    load_sql_objects(op.get_bind(), "claim_tasks.v21")
    op.drop_index("ix_tasks_claim_desc", table_name="tasks")
