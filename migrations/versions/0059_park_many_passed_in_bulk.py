"""A claim that passed many fits in full pools parks the rows ahead in bulk.

Revision ID: 0059
Revises: 0058
Create Date: 2026-11-30

park_rows v8. A claim that met at least 8 fits in full pools (each found by
the buckets and passed after take_task found its pool full) reads ahead
c_bulk rows in all, a share in every group (queue, priority) the passed rows
lie in, where version 7 read 64 rows in each of 8 groups: a head of 20,000
rows in full pools took 66 claims of about 80 ms to park, and now takes 3.
Only the function changes; its signature is the same.
"""

from __future__ import annotations

from alembic import op

from taskqueue.migrate import load_sql_objects

revision = "0059"
down_revision = "0058"
branch_labels = None
depends_on = None


def upgrade() -> None:
    load_sql_objects(op.get_bind(), "park_rows.v8")


def downgrade() -> None:
    load_sql_objects(op.get_bind(), "park_rows.v7")
