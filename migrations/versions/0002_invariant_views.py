"""Invariant views, and when each pool's limit was last set.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-22
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from taskqueue.migrate import load_sql_objects

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

VIEWS = (
    "invariant_violations",
    "invariant_overdue_scheduled",
    "invariant_attempts_exceeded",
    "invariant_finished_with_lease",
    "invariant_running_without_lease",
    "invariant_pool_over_limit",
    "invariant_pool_counts",
)


def upgrade() -> None:
    # A pool may stay over a limit lowered while its tasks ran; the check tells
    # that apart from over-admission by the time the limit was last set.
    op.add_column(
        "pools",
        sa.Column(
            "limit_changed_at",
            sa.DateTime(timezone=True),
            nullable=True,
            comment="When running_limit was last set; claims since then all saw it.",
        ),
    )
    load_sql_objects(op.get_bind(), *(f"{view}.v1" for view in reversed(VIEWS)))


def downgrade() -> None:
    for view in VIEWS:
        op.execute(sa.text(f"DROP VIEW IF EXISTS {view}"))
    op.drop_column("pools", "limit_changed_at")
