"""A descending walk over every queue finds its priorities a chunk at a time.

Revision ID: 0030
Revises: 0029
Create Date: 2026-11-26

claim_tasks v22: a claim with no queue list in order="max" found each
priority below the current one with its own descent of ix_tasks_claim_any,
then read that priority's rows with another. Where every task has its own
priority (deadlines, scores), that is two descents for every row read: over
1,000 queues with sizes in MB, 0.10x the naive query at 200,000 tasks. It
now reads the order a chunk at a time, (priority DESC, id DESC), 16 rows at
first and twice as many each step up to 256: every priority above the
chunk's lowest is whole in it and is read back in id order by one
statement, and the lowest is read in id order with one more.

A claim of one task over a list of several queues in order="max" merged a
window of each listed queue (0.33x the naive query over 20 of 40 queues
with half the tasks fitting). It now looks first along the order over
every queue, keeping the listed queues' rows, as an ascending list's claim
does; a dry look asks the list's buckets and looks again from their find.

Only the function changes; no table or index does.
"""

from __future__ import annotations

from alembic import op

from taskqueue.migrate import load_sql_objects

revision = "0030"
down_revision = "0029"
branch_labels = None
depends_on = None


def upgrade() -> None:
    load_sql_objects(op.get_bind(), "claim_tasks.v22")


def downgrade() -> None:
    load_sql_objects(op.get_bind(), "claim_tasks.v21")
