"""A descending claim over one queue walks its index backwards and stops at its fits, as the naive query does.

Revision ID: 0049
Revises: 0048
Create Date: 2026-11-29

claim_tasks v35. Version 34's look read ix_tasks_claim backwards in chunks,
8 rows doubling to 512, and sorted each chunk's whole priorities into claim
order (priority DESC, id): a pile of tasks too big at the head cost up to
twice its rows and a sort. Where every task has its own priority, shuffled,
and half of them fit, the pile grows by one task a claim and the claim ran
at 0.68x the naive query. The look now walks the index backwards (claim
order but for ids within a priority) up to its c_head-th fit, as the naive
query walks to its first, and reads only the lowest priority it kept
forward, in id order, for that priority's first fits.

Only the function changes; no table or index does.
"""

from __future__ import annotations

from alembic import op

from taskqueue.migrate import load_sql_objects

revision = "0049"
down_revision = "0048"
branch_labels = None
depends_on = None


def upgrade() -> None:
    load_sql_objects(op.get_bind(), "claim_tasks.v35")


def downgrade() -> None:
    load_sql_objects(op.get_bind(), "claim_tasks.v34")
