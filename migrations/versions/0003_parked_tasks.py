"""Park the tasks of full pools out of the claim index.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-22
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from taskqueue.migrate import load_sql_objects

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None

# Tasks of full pools are parked out of the claim index (seed 002's lesson: a
# claim must not walk the tasks of full pools). A claim parks the full-pool
# tasks it finds ahead of what it can take; a pool that gets a free slot
# unparks its tasks in the same transaction (trigger unpark_on_free_slot).
# Invariant, checked by invariant_parked_in_open_pool: a parked task's pool
# exists and is full at every commit.
UP = (
    "park_tasks.v1",
    "unpark_tasks.v1",
    "unpark_triggers.v1",
    "invariant_parked_in_open_pool.v1",
    "invariant_violations.v2",
    "claim_tasks.v2",
)


def upgrade() -> None:
    op.add_column(
        "tasks",
        sa.Column(
            "parked",
            sa.Boolean(),
            server_default=sa.text("false"),
            nullable=False,
            comment="Queued in a full pool and left out of ix_tasks_claim until the pool has room.",
        ),
    )
    op.drop_index("ix_tasks_claim", table_name="tasks")
    op.create_index(
        "ix_tasks_claim", "tasks", ["queue", "priority", "required", "id"],
        postgresql_where=sa.text("state = 'queued' AND NOT parked"),
    )
    op.create_index("ix_tasks_parked", "tasks", ["pool"], postgresql_where=sa.text("parked AND state = 'queued'"))
    op.create_table_comment(
        "tasks", "One row per task. Claimable rows are state = 'queued' and not parked; see ix_tasks_claim."
    )
    load_sql_objects(op.get_bind(), *UP)


def downgrade() -> None:
    # The combined view and the claim function as revisions 0001 and 0002 made them.
    load_sql_objects(op.get_bind(), "invariant_violations.v1", "claim_tasks.v1")
    op.execute(sa.text("DROP VIEW IF EXISTS invariant_parked_in_open_pool"))
    op.execute(sa.text("DROP TRIGGER IF EXISTS unpark_on_delete ON pools"))
    op.execute(sa.text("DROP TRIGGER IF EXISTS unpark_on_free_slot ON pools"))
    op.execute(sa.text("DROP FUNCTION IF EXISTS unpark_tasks()"))
    op.execute(sa.text("DROP FUNCTION IF EXISTS park_tasks(text, integer, integer, text[])"))
    op.drop_index("ix_tasks_parked", table_name="tasks")
    op.drop_index("ix_tasks_claim", table_name="tasks")
    op.create_index("ix_tasks_claim", "tasks", ["queue", "priority", "required", "id"], postgresql_where=sa.text("state = 'queued'"))
    op.drop_column("tasks", "parked")
    op.create_table_comment("tasks", "One row per task. Claimable rows are state = 'queued'; see ix_tasks_claim.")
