"""A claim of one task with less than 16 available reads and takes in two statements.

Revision ID: 0036
Revises: 0035
Create Date: 2026-11-27

claim_tasks v26, step S (ascending): below 16 every bucket holds one size, so the
first fitting rows in claim order are among the first few of each bucket
that fits. The claim reads those (one statement, no lock), merges them in
claim order and locks and starts the first that no one holds (a second
statement). Version 25 parsed the session's hint, looked along the claim
order, asked fit_candidate, looked again and then took, five statements.
A pooled candidate first, or every candidate locked elsewhere, goes the
general way as before, and so does a descending claim.

Only the function changes; no table or index does.
"""

from __future__ import annotations

from alembic import op

from taskqueue.migrate import load_sql_objects

revision = "0036"
down_revision = "0035"
branch_labels = None
depends_on = None


def upgrade() -> None:
    load_sql_objects(op.get_bind(), "claim_tasks.v26")


def downgrade() -> None:
    load_sql_objects(op.get_bind(), "claim_tasks.v25")
