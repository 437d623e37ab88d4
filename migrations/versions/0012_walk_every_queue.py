"""A claim over many queues walks the shared claim order before it asks each queue's buckets.

Revision ID: 0012
Revises: 0011
Create Date: 2026-11-23

claim_tasks v8 read the head of claim order over every queue at once
(ix_tasks_claim_any), but once its 64-row window found nothing that fit, it
asked the fit buckets of every queue: about 27 probes per queue, since their
indexes lead with the queue. With 1,000 queues and half the tasks fitting,
a claim with no queue list ran at 0.07x the naive query (bench shape
queues_half).

claim_tasks v9 lists 8 queues first, then four times as many each time it
must (claimable_queues v1, a loose scan that waiting_heads v2 now shares).
Over one queue it asks the buckets as before; over several it reads the
claim order on, a share of rows per listed queue (8 per class below what is
left + 1) since the last task taken, and asks the buckets only once every
queue is listed and its share walked. No index changes.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from taskqueue.migrate import load_sql_objects

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None


def upgrade() -> None:
    load_sql_objects(op.get_bind(), "claimable_queues.v1", "claim_tasks.v9", "waiting_heads.v2")


def downgrade() -> None:
    load_sql_objects(op.get_bind(), "waiting_heads.v1", "claim_tasks.v8")
    op.execute(sa.text("DROP FUNCTION claimable_queues(text, integer)"))
