"""A claim's lookups by id use the primary key whatever the statistics say.

Revision ID: 0026
Revises: 0025
Create Date: 2026-11-25

claim_tasks v19, take_task v2 and park_rows v2 test a row found by id with
state = 'queued' COLLATE "C". The claim indexes' predicate (state =
'queued') can then no longer be proved from it, so the planner cannot pick
one of them for the lookup. It did after statistics taken while the queue
was nearly empty: such an index looked empty, and reading all of it with a
filter on id seemed cheaper than the primary key. With 200,000 tasks
enqueued after an ANALYZE of an empty queue, every take read a whole claim
index (1,336 buffers), and a claim of 100 tasks cost 455 ms instead of 18.

Only the functions change; no table or index does.
"""

from __future__ import annotations

from alembic import op

from taskqueue.migrate import load_sql_objects

revision = "0026"
down_revision = "0025"
branch_labels = None
depends_on = None


def upgrade() -> None:
    load_sql_objects(op.get_bind(), "take_task.v2", "park_rows.v2", "claim_tasks.v19")


def downgrade() -> None:
    load_sql_objects(op.get_bind(), "take_task.v1", "park_rows.v1", "claim_tasks.v18")
