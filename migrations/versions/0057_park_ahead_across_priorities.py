"""A claim that passed fits in full pools parks the fits ahead across priorities too.

Revision ID: 0057
Revises: 0056
Create Date: 2026-11-30

park_rows v7, claim_tasks v42. Where every task has its own priority
(deadlines, epoch seconds, scores), the rows ahead of a passed fit within its
own priority are none, so a claim that took a task parked only the rows it
had passed, and the next claims met the same mix of fits in full pools and
fits with room. claim_tasks v42 passes its amount and direction to park_rows,
which then also reads c_ahead rows per queue ahead in claim order across
priorities and parks the fits among them whose pool it locked full. Only the
functions change; park_rows gains a parameter with a default, so its old
signature is dropped first.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from taskqueue.migrate import load_sql_objects

revision = "0057"
down_revision = "0056"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(sa.text("DROP FUNCTION park_rows(bigint[], text[], boolean, bigint)"))
    load_sql_objects(op.get_bind(), "park_rows.v7", "claim_tasks.v42")


def downgrade() -> None:
    op.execute(sa.text("DROP FUNCTION park_rows(bigint[], text[], boolean, bigint, boolean)"))
    load_sql_objects(op.get_bind(), "park_rows.v6", "claim_tasks.v41")
