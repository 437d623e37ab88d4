"""A single descending claim that lost its row reads on in two statements, as the look does.

Revision ID: 0025
Revises: 0024
Create Date: 2026-11-25

claim_tasks v18: with several consumers over one queue in descending
order, a claim often finds that the row the buckets gave it was just taken
by another. Version 15 then read the next rows through a cursor, called
take_task for each fit in turn and started the one it got with a last
UPDATE. One task over one queue now reads the same window into an array
in one statement, and a second locks and starts the first of its fits
that no one has locked (ahead of any pooled fit), as the ascending look
does. When a pooled fit was read and nothing started, the cursor path
reads the window as before.

Only the function changes; no table or index does.
"""

from __future__ import annotations

from alembic import op

from taskqueue.migrate import load_sql_objects

revision = "0025"
down_revision = "0024"
branch_labels = None
depends_on = None


def upgrade() -> None:
    load_sql_objects(op.get_bind(), "claim_tasks.v18")


def downgrade() -> None:
    load_sql_objects(op.get_bind(), "claim_tasks.v17")
