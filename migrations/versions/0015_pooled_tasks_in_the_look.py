"""The look starts a pooled task itself, with its pool's slot.

Revision ID: 0015
Revises: 0014
Create Date: 2026-11-24

claim_tasks v11's look starts only tasks with no pool. It sent every fitting
task in a pool to the general path (a cursor window, take_task and
take_pool_slot, the buckets), which found the fits in full pools one pool at
a time. Where every task has a pool and half the pools are full, that came to
1.6 bucket searches and 1.8 take_task calls a claim, and the claim ran at
0.68x the naive query.

claim_tasks v12's look reads, with each fit, whether its pool was full. It
locks and starts the first fit no one holds among those whose pool was not
full, and takes that task's pool slot in the same statement (the task row
first, then the pool, as take_task does). Fits in full pools are
passed over and parked; a pool found full under its lock sends the claim on
to the general path, from just before that task, as before. A pooled task
found by the buckets goes back to the look, as one with no pool did.

Only the function changes; no table or index does.
"""

from __future__ import annotations

from alembic import op

from taskqueue.migrate import load_sql_objects

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None


def upgrade() -> None:
    load_sql_objects(op.get_bind(), "claim_tasks.v12")


def downgrade() -> None:
    load_sql_objects(op.get_bind(), "claim_tasks.v11")
