"""A list of several queues whose own windows ran dry says so, and the next claims skip them.

Revision ID: 0024
Revises: 0023
Create Date: 2026-11-25

claim_tasks v17: over a list of several queues, once each listed queue's
head holds only tasks too big for the claim, each queue's own 8-row window
(one statement over the whole list) found nothing before fit_candidate
searched every listed queue anyway: over 20 listed queues of 40, about 320
us of a claim's 1,845 us in steady state. When those windows read all they
may and nothing fit, the session's hint says so (its key: 'own:' and the
md5 of the list), and the next 15 claims of no larger an amount skip the
look and the windows and ask the buckets from the start of the order,
which find the same task. The hint skips statements, never rows.

Only the function changes; no table or index does.
"""

from __future__ import annotations

from alembic import op

from taskqueue.migrate import load_sql_objects

revision = "0024"
down_revision = "0023"
branch_labels = None
depends_on = None


def upgrade() -> None:
    load_sql_objects(op.get_bind(), "claim_tasks.v17")


def downgrade() -> None:
    load_sql_objects(op.get_bind(), "claim_tasks.v16")
