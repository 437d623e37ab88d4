"""A claim that parks full pools' tasks parks the rows right after them too.

Revision ID: 0031
Revises: 0030
Create Date: 2026-11-27

park_rows v3: with the rows a claim walked past because their pool was full
go the next 64 claimable rows of the same queue and priority, those whose
pool is full. They come next in claim order whichever way a claim runs.
Where 90% of 200,000 tasks wait in full pools (2,000 pools, 8 consumers),
each claim walked past about 9 such rows and parked them, and the next claim
found the same mix at its head; a call now clears a stretch. The pools are
looked up by name from the rows' own list, so the plan reads one pool row
per name however many pools the table holds.

Only the function changes; no table or index does.
"""

from __future__ import annotations

from alembic import op

from taskqueue.migrate import load_sql_objects

revision = "0031"
down_revision = "0030"
branch_labels = None
depends_on = None


def upgrade() -> None:
    load_sql_objects(op.get_bind(), "park_rows.v3")


def downgrade() -> None:
    load_sql_objects(op.get_bind(), "park_rows.v2")
