"""A claim that passed all the rows it may park parks thousands more ahead of them, in every queue it passed.

Revision ID: 0044
Revises: 0043
Create Date: 2026-11-28

park_rows v5: the rows ahead of every queue and priority the passed rows
lie in (up to 8 of them), not only of the row with the largest id. When a
claim hands over as many rows as it may (claim_tasks' c_park, 500), the
backlog behind its full pools is longer than one claim can clear, and the
rows ahead are read up to 8,192 in all instead of 64. A pool that fills
behind a long backlog is then parked in a few claims, not in dozens that
each pass everything still unparked. See docs/performance.md, "parking a
backlog in bulk (migration 0044)". The passed rows' pools are asked first:
where none may be parked (one busy pool, freed every moment), nothing ahead
is read at all.

Only the function changes; no table or index does.
"""

from __future__ import annotations

from alembic import op

from taskqueue.migrate import load_sql_objects

revision = "0044"
down_revision = "0043"
branch_labels = None
depends_on = None


def upgrade() -> None:
    load_sql_objects(op.get_bind(), "park_rows.v5")


def downgrade() -> None:
    load_sql_objects(op.get_bind(), "park_rows.v4")
