"""A single claim takes a fitting task at the head of claim order in one statement.

Revision ID: 0010
Revises: 0009
Create Date: 2026-11-23

claim_tasks v7 adds a first step for the most common call, one task from one
queue in ascending order: it reads the first 8 claimable rows and, when one of
them fits, has no pool and comes before any fitting pooled row, locks the
first such row no one else holds and starts it in one statement. Before, the
same row cost a cursor over a 64-row window, a take_task call and a final
UPDATE. When none of the 8 fits, the window goes on after them, so the
general path reads no row twice. A claim that chose nothing no longer runs
the final UPDATE. No table or index changes.
"""

from __future__ import annotations

from alembic import op

from taskqueue.migrate import load_sql_objects

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    load_sql_objects(op.get_bind(), "claim_tasks.v7")


def downgrade() -> None:
    load_sql_objects(op.get_bind(), "claim_tasks.v6")
