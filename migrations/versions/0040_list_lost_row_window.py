"""A listed claim whose row was taken by a concurrent claim reads on from it, whatever is left.

Revision ID: 0040
Revises: 0039
Create Date: 2026-11-27

claim_tasks v30: a claim over a list of several queues, ascending, whose
bucket search found a row that a concurrent claim then took reads the
shared window of the listed queues on from that row, as a descending claim
has since v15. Below 16 available it asked the buckets again from that row,
one call per lost row.

Only the function changes; no table or index does.
"""

from __future__ import annotations

from alembic import op

from taskqueue.migrate import load_sql_objects

revision = "0040"
down_revision = "0039"
branch_labels = None
depends_on = None


def upgrade() -> None:
    load_sql_objects(op.get_bind(), "claim_tasks.v30")


def downgrade() -> None:
    load_sql_objects(op.get_bind(), "claim_tasks.v29")
