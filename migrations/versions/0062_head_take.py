"""A claim of one task first takes from the head of the claim order in one statement.

Revision ID: 0062
Revises: 0061
Create Date: 2026-12-02

claim_tasks v46. Over every queue, or over one queue in ascending order, a
claim of one task first runs one statement of the naive query's shape: the
next 32 rows of the claim order, read lazily, the first that fits, is not in
a pool known full and could be locked, started in the same statement (with
its pool's slot, when it has a pool). Its answer is the claim's. On a miss
the claim goes on as before, and the session skips the head take for its
next 15 claims, doubling after each further miss up to 255.
"""

from __future__ import annotations

from alembic import op

from taskqueue.migrate import load_sql_objects

revision = "0062"
down_revision = "0061"
branch_labels = None
depends_on = None


def upgrade() -> None:
    load_sql_objects(op.get_bind(), "claim_tasks.v46")


def downgrade() -> None:
    load_sql_objects(op.get_bind(), "claim_tasks.v45")
