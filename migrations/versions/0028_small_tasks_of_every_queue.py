"""A claim over every queue with less than 16 left asks every queue's small tasks at once.

Revision ID: 0028
Revises: 0027
Create Date: 2026-11-26

ix_tasks_fit_small_any orders the claimable tasks that need less than 16,
over every queue, by (bucket, priority, id). fit_candidate v9 probes it
once per amount that fits when it is given no queue list, and claim_tasks
v20 gives it none for a claim over every queue with less than 16 left.
Before, such a claim whose head held nothing that fit listed every queue
with claimable tasks, walked the shared order 16 rows a queue and class,
and asked each queue's buckets, about 10 us a queue for each: 33 ms a claim
over 1,000 queues (queues_deadlines), 1.17x the naive query with 8
consumers at 1M tasks. In descending order such a claim listed every queue
before anything else; now it lists none (queues_deadlines_max).

One more index entry for each task that needs less than 16; none for the
others. Its predicate adds id > 0 and bucket < 16, which only those probes
state, so no per-queue statement can be planned on it.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from taskqueue.migrate import load_sql_objects

revision = "0028"
down_revision = "0027"
branch_labels = None
depends_on = None

SMALL_ANY = "state = 'queued' AND NOT parked AND id > 0 AND bucket < 16"


def upgrade() -> None:
    op.create_index(
        "ix_tasks_fit_small_any", "tasks", ["bucket", "priority", "id"], postgresql_where=sa.text(SMALL_ANY)
    )
    load_sql_objects(op.get_bind(), "fit_candidate.v9", "claim_tasks.v20")


def downgrade() -> None:
    load_sql_objects(op.get_bind(), "claim_tasks.v19", "fit_candidate.v8")
    op.drop_index("ix_tasks_fit_small_any", table_name="tasks")
