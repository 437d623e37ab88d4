"""A small descending claim whose best priority fills a bucket reads that priority forward.

Revision ID: 0038
Revises: 0037
Create Date: 2026-11-27

claim_tasks v28, step S descending (less than 16 available, one task, every
queue or one queue): when nothing read backward is above the highest
priority a bucket's read may have cut short, that priority is the best one
that fits. Its rows are read forward in each bucket, in id order, merged by
id and kept up to the smallest last id among the buckets that gave a full
read; the first of them no one has locked is taken as before. Version 27
sent such a claim the general way and skipped step S for the session's
next 15 small claims.

Only the function changes; no table or index does.
"""

from __future__ import annotations

from alembic import op

from taskqueue.migrate import load_sql_objects

revision = "0038"
down_revision = "0037"
branch_labels = None
depends_on = None


def upgrade() -> None:
    load_sql_objects(op.get_bind(), "claim_tasks.v28")


def downgrade() -> None:
    load_sql_objects(op.get_bind(), "claim_tasks.v27")
