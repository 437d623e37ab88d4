"""A descending look over a list reads further before it asks the buckets.

Revision ID: 0060
Revises: 0059
Create Date: 2026-11-30

claim_tasks v45. A claim of one task over a list of queues in descending
order reads the shared order 64 rows a listed queue for each size class before
it asks the buckets, where version 44 read 16, the ascending figure. Descending,
the buckets ask two probes a level: on a list of 20 queues whose tasks too big
pile up at the head, the look ran dry at a pile of 2,560 rows and each claim
after it cost about 4 ms in the buckets, the cost of some 20,000 rows of look.
"""

from __future__ import annotations

from alembic import op

from taskqueue.migrate import load_sql_objects

revision = "0060"
down_revision = "0059"
branch_labels = None
depends_on = None


def upgrade() -> None:
    load_sql_objects(op.get_bind(), "claim_tasks.v45")


def downgrade() -> None:
    load_sql_objects(op.get_bind(), "claim_tasks.v44")
