"""A single claim whose task the buckets found starts it in one statement.

Revision ID: 0021
Revises: 0020
Create Date: 2026-11-24

claim_tasks v16: outside the look (descending order, lists of several
queues), a claim of one task that the buckets found, with no pool, is
locked and started in one statement, as the look starts its candidates.
Version 15 locked it with take_task (a PL/pgSQL call) and started it with
the final UPDATE. A pooled task still goes through take_task, which takes
its pool's slot. What is claimed is unchanged.

Only the function changes; no table or index does.
"""

from __future__ import annotations

from alembic import op

from taskqueue.migrate import load_sql_objects

revision = "0021"
down_revision = "0020"
branch_labels = None
depends_on = None


def upgrade() -> None:
    load_sql_objects(op.get_bind(), "claim_tasks.v16")


def downgrade() -> None:
    load_sql_objects(op.get_bind(), "claim_tasks.v15")
