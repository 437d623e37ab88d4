"""A claim that takes nothing because every fit sits in a full pool parks those fits in bulk.

Revision ID: 0046
Revises: 0045
Create Date: 2026-11-28

A claim passes a fit whose pool is full and parks it, with the rows ahead of
it in its own queue and priority. Where every task has its own priority
(deadlines, epoch seconds) nothing lies ahead, and a claim that found every
fit in a full pool parked about 21 rows in 11-16 ms: 20,000 such fits took
about 1,000 empty claims to park, each a worker's poll. claim_tasks v32
tells park_rows (v6) when it took nothing; park_rows then reads the passed
rows' queues for fits in value order of `required` (ix_tasks_fit_exact), up
to 8,192 rows, and parks those of the pools it locked full.

Only the functions change; no table or index does. park_rows gains two
parameters with defaults, so its old signature is dropped first.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from taskqueue.migrate import load_sql_objects

revision = "0046"
down_revision = "0045"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(sa.text("DROP FUNCTION park_rows(bigint[], text[])"))
    load_sql_objects(op.get_bind(), "park_rows.v6", "claim_tasks.v32")


def downgrade() -> None:
    op.execute(sa.text("DROP FUNCTION park_rows(bigint[], text[], boolean, bigint)"))
    load_sql_objects(op.get_bind(), "park_rows.v5", "claim_tasks.v31")
