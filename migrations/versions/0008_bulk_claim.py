"""The claim of a worker with no capacity locks its batch in one statement, and never seq-scans.

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-23

claim_tasks v5. With no available amount every task fits, so for one queue
in ascending order the next rows in claim order are locked by one
``FOR UPDATE SKIP LOCKED`` statement instead of one take_task call per row;
pooled rows still take their pool slot one by one, in claim order. That is
the default Worker's claim, and it halves the database's time per task
claimed.

The function also runs with ``enable_seqscan`` off. Its statements are all
index walks or lookups by id, and their generic plans are made once per
session: a worker that started against an empty table planned the statement
that starts the claimed batch (``WHERE id = ANY (...)``) as a seq scan, and
kept scanning the whole table on every claim until an ANALYZE invalidated
the plan.

The window also reads each row's pool as it reads the row, so a pool already
full costs no row or pool lock to find out (park_rows still re-checks under
the pool's lock before it parks).

Only a function changes; no table is touched.
"""

from __future__ import annotations

from alembic import op

from taskqueue.migrate import load_sql_objects

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    load_sql_objects(op.get_bind(), "claim_tasks.v5")


def downgrade() -> None:
    load_sql_objects(op.get_bind(), "claim_tasks.v4")
