"""A claim promotes due scheduled tasks in one pass.

Revision ID: 0032
Revises: 0031
Create Date: 2026-11-27

claim_tasks v23: the due scheduled tasks a claim makes queued are promoted
by one statement. The loop it replaces promoted 1,000 at a time, each batch
from the start of the scheduled index, where the entries of the rows the
earlier batches had promoted were still to be stepped over: a burst of due
tasks cost quadratic time. The first claim after 1,000,000 tasks fell due
at once took 154 s, and takes 57 s now; after 200,000, 14.8 s and 10.3 s.

Only the function changes; no table or index does.
"""

from __future__ import annotations

from alembic import op

from taskqueue.migrate import load_sql_objects

revision = "0032"
down_revision = "0031"
branch_labels = None
depends_on = None


def upgrade() -> None:
    load_sql_objects(op.get_bind(), "claim_tasks.v23")


def downgrade() -> None:
    load_sql_objects(op.get_bind(), "claim_tasks.v22")
