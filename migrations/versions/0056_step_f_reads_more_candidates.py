"""Step F takes the first of 32 fits no one holds; no count is skipped below 1,024 rows.

Revision ID: 0056
Revises: 0055
Create Date: 2026-11-30

claim_tasks v41. With 8 consumers on the same few fits, a claim whose 8
candidates were all held by other claims, or taken since its read, cleared
the session's 'few' hint and walked the shared claim order as the naive
query does, until a count found the fits few again. Step F now reads 32
candidates (the take locks the first one no one holds, so a longer list
costs only the rows passed over), and a claim over every queue that loses
them all counts the fits at its first dry look instead of walking.
count_few_fits v2 skips no call below its largest budget (version 1 skipped
2 after 128 rows and 8 after 512, and each skipped claim walked). No index
or table changes.
"""

from __future__ import annotations

from alembic import op

from taskqueue.migrate import load_sql_objects

revision = "0056"
down_revision = "0055"
branch_labels = None
depends_on = None


def upgrade() -> None:
    load_sql_objects(op.get_bind(), "count_few_fits.v2", "claim_tasks.v41")


def downgrade() -> None:
    load_sql_objects(op.get_bind(), "count_few_fits.v1", "claim_tasks.v40")
