"""A claim over every queue counts the fits, for step F's hint.

Revision ID: 0054
Revises: 0053
Create Date: 2026-11-30

count_few_fits v1 (new), claim_tasks v39. Over 1,000 queues with 0.05% of the tasks fitting at the
far end of the claim order, the walk along the shared order found every fit
before any claim asked fit_candidate, so no read said the fits were few and
each claim walked (60 ms at 200,000 tasks). A claim of one task over every
queue now asks count_few_fits at its first dry look, and before a look that
may walk as far as the session's count of queues allows: it counts the fits
in one range of ix_tasks_fit_any_exact within a small budget that grows
while the count runs past it (128 rows, then 512, then 1,024, each count
past its budget skipping the next 2 calls, 8 past 512, 255 past 1,024). Found few, the
claim goes on from the first fit (few_fits, in the same range) rather than
along the walk, and the session's next claims take step F. No index or
table changes.
"""

from __future__ import annotations

from alembic import op

from taskqueue.migrate import load_sql_objects

revision = "0054"
down_revision = "0053"
branch_labels = None
depends_on = None


def upgrade() -> None:
    load_sql_objects(op.get_bind(), "count_few_fits.v1", "claim_tasks.v39")


def downgrade() -> None:
    load_sql_objects(op.get_bind(), "claim_tasks.v38")
    op.execute("DROP FUNCTION count_few_fits(bigint)")
