"""Over several queues, the fits are read whole first when they are few.

Revision ID: 0052
Revises: 0051
Create Date: 2026-11-29

few_fits v1, fit_candidate v13, claim_tasks v37. Each level of the resource fit is a probe per queue, so a
claim over 100 queues paid thousands of index descents whatever the number
of fits: 100 queues, every task its own priority, sizes in bytes, 0.05%
fitting, order="max", 65 ms a claim at 200,000 tasks, about as slow as a naive
query that walks every row. A call over several queues now first reads the
fitting rows of each queue in ix_tasks_fit_exact's order, index only, up to
128 rows a queue in all; read to the end, the best of them is the answer.
Past that budget the levels answer as before, and the session skips the read
for its next 31 calls of at least that amount.

claim_tasks v37: while a session's last such read found the fits few, its
claims over several queues ask few_fits first, before the look and the
windows along the shared order (about 20 ms a claim on that shape).

Only the function changes; no table or index does.
"""

from __future__ import annotations

from alembic import op

from taskqueue.migrate import load_sql_objects

revision = "0052"
down_revision = "0051"
branch_labels = None
depends_on = None


def upgrade() -> None:
    load_sql_objects(op.get_bind(), "few_fits.v1", "fit_candidate.v13", "claim_tasks.v37")


def downgrade() -> None:
    load_sql_objects(op.get_bind(), "claim_tasks.v36", "fit_candidate.v12")
    op.execute("DROP FUNCTION few_fits(text[], bigint, bigint, bigint, boolean, text[], integer, bigint)")
