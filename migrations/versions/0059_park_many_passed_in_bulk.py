"""A claim of one task that passed many fits in full pools parks the rows ahead in bulk.

Revision ID: 0059
Revises: 0058
Create Date: 2026-11-30

park_rows v8, claim_tasks v44. A claim of one task that met at least 8 fits
in full pools (each found by the buckets and passed after take_task found its
pool full) reads ahead c_bulk rows in all, a share in every group (queue,
priority) the passed rows lie in, where version 7 read 64 rows in each of 8
groups: a head of 20,000 rows in full pools took 66 claims of about 80 ms to
park, and now takes 3. claim_tasks v44 tells park_rows whether the claim takes
one task (a claim of several parks as before); park_rows gains a parameter
with a default, so its old signature is dropped first.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from taskqueue.migrate import load_sql_objects

revision = "0059"
down_revision = "0058"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(sa.text("DROP FUNCTION park_rows(bigint[], text[], boolean, bigint, boolean)"))
    load_sql_objects(op.get_bind(), "park_rows.v8", "claim_tasks.v44")


def downgrade() -> None:
    op.execute(sa.text("DROP FUNCTION park_rows(bigint[], text[], boolean, bigint, boolean, boolean)"))
    load_sql_objects(op.get_bind(), "park_rows.v7", "claim_tasks.v43")
