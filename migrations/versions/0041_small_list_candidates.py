"""A small listed claim whose look ran dry reads several fits of its list at once, bucket by bucket.

Revision ID: 0041
Revises: 0040
Create Date: 2026-11-27

claim_tasks v31, step L: a claim of one task over a list of several queues,
ascending, with less than 16 available, while its session's hint says the
look along the shared order ran dry for that list. It reads the first 16
rows of each bucket that fits over every queue (ix_tasks_fit_small_any),
keeps the listed queues' rows up to the point where every listed fit was
read, and takes the first of them no one has locked, in one statement more.
Before, the buckets of each listed queue were asked one by one for the one
first fit (fit_candidate: 100 probes for 20 queues and 4 available), and
concurrent consumers were all sent to the same row. A list whose fits all
lie past that point goes the general way, as before, and its session skips
step L for its next 15 small claims.

Only the function changes; no table or index does.
"""

from __future__ import annotations

from alembic import op

from taskqueue.migrate import load_sql_objects

revision = "0041"
down_revision = "0040"
branch_labels = None
depends_on = None


def upgrade() -> None:
    load_sql_objects(op.get_bind(), "claim_tasks.v31")


def downgrade() -> None:
    load_sql_objects(op.get_bind(), "claim_tasks.v30")
