"""A claim of several tasks takes few fits from one read of them.

Revision ID: 0055
Revises: 0054
Create Date: 2026-11-30

claim_tasks v40. A claim of more than one task over every queue (or a list
of 4 to 128) walked the shared claim order between its fits when they were
few: over 1,000 queues with 0.05% of the tasks fitting, claim_many(limit=100)
read 15,053 buffers at 200,000 tasks, and its time per task grew 6.8x from
10,000 tasks to 1,000,000. It now asks the session's 'few' hint, or else
count_few_fits, and when the fits are few it reads them whole in claim order
(few_fits) and takes them in that order, each one that still fits what is
left. No index or table changes.
"""

from __future__ import annotations

from alembic import op

from taskqueue.migrate import load_sql_objects

revision = "0055"
down_revision = "0054"
branch_labels = None
depends_on = None


def upgrade() -> None:
    load_sql_objects(op.get_bind(), "claim_tasks.v40")


def downgrade() -> None:
    load_sql_objects(op.get_bind(), "claim_tasks.v39")
