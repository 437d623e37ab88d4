"""One BEFORE UPDATE trigger on pools, with a short condition, in place of two.

Revision ID: 0061
Revises: 0060
Create Date: 2026-11-30

mark_freed_on_free_slot (mark_pool_freed) and reopen_on_free_slot
(reopen_pool) become on_pool_room (pool_room_changed), which runs both
bodies in the same order under the condition they shared. PostgreSQL 15
prepares a trigger's WHEN condition from its text in every statement that
updates the table, and every claim and completion of a pooled task updates
its pool's row: under callgrind such an UPDATE cost 245,000 server
instructions with the two triggers and 96,000 with this one. What the
triggers do, and when, is unchanged.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from taskqueue.migrate import load_sql_objects

revision = "0061"
down_revision = "0060"
branch_labels = None
depends_on = None


def upgrade() -> None:
    load_sql_objects(op.get_bind(), "pool_room.v1")


def downgrade() -> None:
    op.execute(sa.text("DROP TRIGGER on_pool_room ON pools"))
    op.execute(sa.text("DROP FUNCTION pool_room_changed()"))
    load_sql_objects(op.get_bind(), "mark_pool_freed.v1", "reopen_pool.v1", "pool_triggers.v2")
