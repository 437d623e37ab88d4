"""A cheaper look, a plain walk over every queue, and a pooled fit handed on from just before it.

Revision ID: 0014
Revises: 0013
Create Date: 2026-11-24

claim_tasks v10's look takes the first fitting task with no pool. When it
meets a fitting task in a pool first, the general path asks that pool; v10
started that path where the look had started, so it read again every row
the look had just read, up to 608 a claim at half a million available.
Where every task has a pool (sizes 1..1M, half fit, pools of which half are
full) that made the claim slower than v9, which read 8 rows again.

claim_tasks v11 starts the general path just before the fitting pooled
task: every row before it was too big, or a fit with no pool that no one
could take. It also clears a taskqueue.dry_look setting that does not read
'amount:skips:queue' instead of parsing it, so a value set by hand cannot
make a claim fail.

The look also reads more cheaply. v10 numbered every row it read
(row_number()), which cost as much as reading them; v11 numbers only the
fits, and reads the budget's last key in the same statement only when
nothing fits. Over every queue, a look that finds nothing walks on in plain
statements, twice as far as step W's cursor windows would have (a row costs
about half as much), listing queues only as the walk outgrows those listed;
the session keeps the count of queues it listed (taskqueue.queue_count), so
its next claim walks that far before it lists any queue. A list of several
queues looks that far along the shared order at once.

Only the function changes; no table or index does.
"""

from __future__ import annotations

from alembic import op

from taskqueue.migrate import load_sql_objects

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None


def upgrade() -> None:
    load_sql_objects(op.get_bind(), "claim_tasks.v11")


def downgrade() -> None:
    load_sql_objects(op.get_bind(), "claim_tasks.v10")
