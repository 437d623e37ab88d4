"""A descending claim that loses its row reads on from it; a boundary walk stops at the best row.

Revision ID: 0019
Revises: 0018
Create Date: 2026-11-24

claim_tasks v15: in descending order (``order="max"``), when the row the
buckets found is taken by a concurrent claim first, the claim reads the
next rows in claim order after it (the window), whatever amount is left.
Before, below 16 left, it asked the buckets again from that row; with 8
consumers over one queue whose tasks each have their own priority, each
claim asked them about three times. What is claimed is unchanged: the
window and the buckets both go on from the same key.

fit_candidate v4: a walk of the boundary bucket (the fine bucket that holds
what is left + 1) stops at the best row found so far. Version 3 filtered
the rows at or after it out only after its LIMIT had counted them, so one
walk could read 256 rows that could never be the answer.

Only the functions change; no table or index does.
"""

from __future__ import annotations

from alembic import op

from taskqueue.migrate import load_sql_objects

revision = "0019"
down_revision = "0018"
branch_labels = None
depends_on = None


def upgrade() -> None:
    load_sql_objects(op.get_bind(), "fit_candidate.v4", "claim_tasks.v15")


def downgrade() -> None:
    load_sql_objects(op.get_bind(), "claim_tasks.v14", "fit_candidate.v3")
