"""The fit claim at bounded cost on every shape: required buckets and a head window.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-23

The claim of 0001/0003 enumerated distinct priorities and distinct required
values one probe at a time: O(distinct values), which reaches the row count
when sizes are MB or priorities are deadlines. It now reads a window at the
head of claim order and, when nothing there fits, one probe per required
bucket (tasks.bucket, a generated column; see required_bucket.v1.sql).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from taskqueue.migrate import load_sql_objects

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None

CLAIMABLE = "state = 'queued' AND NOT parked"
OLD_CLAIM = "claim_tasks(bigint, integer, text[], text, double precision, boolean)"
NEW_CLAIM = "claim_tasks(bigint, integer, text[], text, double precision, boolean, boolean)"


def upgrade() -> None:
    load_sql_objects(op.get_bind(), "required_bucket.v1")
    op.add_column(
        "tasks",
        sa.Column(
            "bucket",
            sa.SmallInteger(),
            sa.Computed("required_bucket(required)", persisted=True),
            nullable=False,
            comment="required_bucket(required): exact below 16, four per doubling above; kept by PostgreSQL.",
        ),
    )
    op.drop_index("ix_tasks_claim", table_name="tasks")
    op.create_index("ix_tasks_claim", "tasks", ["queue", "priority", "id"], postgresql_where=sa.text(CLAIMABLE))
    op.create_index("ix_tasks_fit", "tasks", ["queue", "bucket", "priority", "id"], postgresql_where=sa.text(CLAIMABLE))
    op.create_index(
        "ix_tasks_fit_exact", "tasks", ["queue", "required", "priority", "id"], postgresql_where=sa.text(CLAIMABLE)
    )
    op.execute(sa.text(f"DROP FUNCTION {OLD_CLAIM}"))
    op.execute(sa.text("DROP FUNCTION park_tasks(text, integer, integer, text[])"))
    load_sql_objects(op.get_bind(), "take_task.v1", "park_rows.v1", "fit_candidate.v1", "claim_tasks.v3")


def downgrade() -> None:
    op.execute(sa.text(f"DROP FUNCTION {NEW_CLAIM}"))
    op.execute(sa.text("DROP FUNCTION fit_candidate(text[], bigint, bigint, bigint, boolean, text[])"))
    op.execute(sa.text("DROP FUNCTION park_rows(bigint[], text[])"))
    op.execute(sa.text("DROP FUNCTION take_task(bigint, text, boolean, text[], text[])"))
    op.drop_index("ix_tasks_fit_exact", table_name="tasks")
    op.drop_index("ix_tasks_fit", table_name="tasks")
    op.drop_index("ix_tasks_claim", table_name="tasks")
    op.create_index(
        "ix_tasks_claim", "tasks", ["queue", "priority", "required", "id"], postgresql_where=sa.text(CLAIMABLE)
    )
    op.drop_column("tasks", "bucket")
    op.execute(sa.text("DROP FUNCTION required_bucket(integer)"))
    load_sql_objects(op.get_bind(), "park_tasks.v1", "claim_tasks.v2")
