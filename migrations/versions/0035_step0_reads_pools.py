"""A claim of every size reads each row's pool before it asks for a slot.

Revision ID: 0035
Revises: 0034
Create Date: 2026-11-27

claim_tasks v25: step 0 (no available amount, one queue or every queue,
ascending: the default Worker's claim) reads with each row whether its pool
is full, as the look and the windows already did, and asks take_pool_slot
only for a pool that had room. Before, the first pooled row of every claim
asked for a slot, and take_pool_slot may wait for the first pool row a
claim locks: with one pool of limit 2 holding every other task, the 8
consumers queued on that pool's row in turn, full or not.

Only the function changes; no table or index does.
"""

from __future__ import annotations

from alembic import op

from taskqueue.migrate import load_sql_objects

revision = "0035"
down_revision = "0034"
branch_labels = None
depends_on = None


def upgrade() -> None:
    load_sql_objects(op.get_bind(), "claim_tasks.v25")


def downgrade() -> None:
    load_sql_objects(op.get_bind(), "claim_tasks.v24")
