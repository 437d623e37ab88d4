"""A descending walk of the boundary reads a window of many priorities a turn.

Revision ID: 0051
Revises: 0050
Create Date: 2026-11-29

fit_candidate v12. In order="max", the walk of the fine bucket that holds
what is left + 1 read the rest of its own priority and then one more
priority a turn, whatever its budget. Where every task has its own priority
it moved by a row or two a turn, and the scan in value order read every
fitting row of the bucket instead: one queue, sizes in bytes around 1 GB,
30% fitting, 13 ms a claim once the tasks too big at the head outgrew the
look, against about 1 ms for the naive query. The walk now reads the next
rows backward up to its budget and counts as walked the priorities a full
window read whole.

Only the function changes; no table or index does.
"""

from __future__ import annotations

from alembic import op

from taskqueue.migrate import load_sql_objects

revision = "0051"
down_revision = "0050"
branch_labels = None
depends_on = None


def upgrade() -> None:
    load_sql_objects(op.get_bind(), "fit_candidate.v12")


def downgrade() -> None:
    load_sql_objects(op.get_bind(), "fit_candidate.v11")
