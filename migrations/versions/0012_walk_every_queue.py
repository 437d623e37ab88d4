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
queue is listed and its share walked.

A claim given a list of several queues reads the head of the shared order
and keeps its own rows, where v8 merged a 64-row window of each listed
queue (141 buffers a claim for 3 queues, 825 for 20; now 24); its queues'
own windows (8 rows each) come only when that head holds nothing of its
own that fits, then the same walk, then the buckets. The head step (8
rows, one statement) runs whatever is available.

ix_tasks_claim_any is built again with "AND id > 0" in its predicate, which
only the statements over every queue state, and a CHECK (id > 0) keeps that
true of every row. Since migration 0011 a bucket probe of fit_candidate
could be planned on that index: when every task has the same size, the
statistics say any bucket holds every row, and a walk of (priority, id)
with a filter looked as cheap as the bucket's own index. It walked the
whole table for each empty bucket: 1,774 buffers and 18 ms per claim at
30,000 tasks that all need 1, with 10 available.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from taskqueue.migrate import load_sql_objects

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None


CLAIMABLE = "state = 'queued' AND NOT parked"


def upgrade() -> None:
    op.create_check_constraint(op.f("ck_tasks_id_positive"), "tasks", "id > 0")
    op.drop_index("ix_tasks_claim_any", table_name="tasks")
    op.create_index("ix_tasks_claim_any", "tasks", ["priority", "id"], postgresql_where=sa.text(CLAIMABLE + " AND id > 0"))
    load_sql_objects(op.get_bind(), "claimable_queues.v1", "claim_tasks.v9", "waiting_heads.v2")


def downgrade() -> None:
    load_sql_objects(op.get_bind(), "waiting_heads.v1", "claim_tasks.v8")
    op.execute(sa.text("DROP FUNCTION claimable_queues(text, integer)"))
    op.drop_index("ix_tasks_claim_any", table_name="tasks")
    op.create_index("ix_tasks_claim_any", "tasks", ["priority", "id"], postgresql_where=sa.text(CLAIMABLE))
    op.drop_constraint(op.f("ck_tasks_id_positive"), "tasks", type_="check")
