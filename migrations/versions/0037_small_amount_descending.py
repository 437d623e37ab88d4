"""A small single claim takes the two-statement way descending too, and with a pooled candidate.

Revision ID: 0037
Revises: 0036
Create Date: 2026-11-27

claim_tasks v27, step S (less than 16 available, one task, every queue or
one queue):
- Descending: each bucket's last rows are read backward, in (priority DESC,
  id DESC). Every row of a priority above the highest priority that a
  bucket's read may have cut short was read, so those rows, merged in
  claim order (priority DESC, id), are the first fits in claim order. With
  none above the cut (the best priority fills a bucket), the claim goes the
  general way, and the session skips step S for its next 15 small claims.
- Pools: a pooled candidate is taken with its pool's slot in the same
  statement, as the look takes it; its pool found full under the lock
  starts nothing, and the claim goes the general way (which parks it), as
  any pooled candidate first did before.

Only the function changes; no table or index does.
"""

from __future__ import annotations

from alembic import op

from taskqueue.migrate import load_sql_objects

revision = "0037"
down_revision = "0036"
branch_labels = None
depends_on = None


def upgrade() -> None:
    load_sql_objects(op.get_bind(), "claim_tasks.v27")


def downgrade() -> None:
    load_sql_objects(op.get_bind(), "claim_tasks.v26")
