"""The tasks of a pool that keeps filling and freeing are walked past, not parked.

Revision ID: 0034
Revises: 0033
Create Date: 2026-11-27

pools.freed_at records when a full pool last got room (trigger
mark_freed_on_free_slot, in the same row update), and park_rows v4 leaves
the tasks of a pool freed in the last second unparked. With one pool of
limit 2 holding half of 100,000 tasks, every release unparked what the
claims had parked since the one before (about 70 ms of row updates, under
the pool's row lock), and the claims parked it all again: 8 consumers ran
at 0.40 of a naive loop. A pool that stays full is parked as before.

The new column is nullable with no default, so adding it rewrites nothing.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from taskqueue.migrate import load_sql_objects

revision = "0034"
down_revision = "0033"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column(
        "pools",
        sa.Column(
            "freed_at",
            sa.DateTime(timezone=True),
            nullable=True,
            comment="When the pool last went from full to having room; its tasks are not parked for a second after.",
        ),
    )
    load_sql_objects(op.get_bind(), "mark_pool_freed.v1", "park_rows.v4")


def downgrade() -> None:
    load_sql_objects(op.get_bind(), "park_rows.v3")
    op.execute(sa.text("DROP TRIGGER mark_freed_on_free_slot ON pools"))
    op.execute(sa.text("DROP FUNCTION mark_pool_freed()"))
    op.drop_column("pools", "freed_at")
