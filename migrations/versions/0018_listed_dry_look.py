"""A list of several queues, and a descending claim, remember a dry look.

Revision ID: 0018
Revises: 0017
Create Date: 2026-11-24

claim_tasks v14: a claim over a list of several queues whose look read its
whole budget and found nothing that fits (the other queues' tasks pile up
at the head of the shared order, one more each claim) says so in the
session's ``taskqueue.dry_look`` hint, keyed by the list. The session's next
15 claims over the same list, of no larger an amount, skip the look and read
each listed queue's own window from the start of the order. The hint skips
a statement, never a row, so what is claimed is unchanged.

One task in descending order (``order="max"``) over one queue learns the
same hint from its first window: a window that read all its 64 rows and
found none that fits. The session's next 15 claims of no larger an amount
ask the buckets at once, starting inside the best priority.

Only the function changes; no table or index does.
"""

from __future__ import annotations

from alembic import op

from taskqueue.migrate import load_sql_objects

revision = "0018"
down_revision = "0017"
branch_labels = None
depends_on = None


def upgrade() -> None:
    load_sql_objects(op.get_bind(), "claim_tasks.v14")


def downgrade() -> None:
    load_sql_objects(op.get_bind(), "claim_tasks.v13")
