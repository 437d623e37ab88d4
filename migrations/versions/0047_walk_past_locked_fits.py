"""A claim that keeps meeting fits held by other transactions walks past them in one statement.

Revision ID: 0047
Revises: 0046
Create Date: 2026-11-28

Each fit a claim lost to another transaction's row lock sent it back to
the buckets (fit_candidate) or through take_task, about 100-170 us a fit.
Where a long transaction held 20,000 queued fits FOR UPDATE (an operator's
SELECT ... FOR UPDATE), an empty claim took 1.6-2.7 s against the naive
query's 34-50 ms. claim_tasks v33 adds step K: after 8 such losses it walks
the claim order on and locks the first fit no one holds with FOR UPDATE
SKIP LOCKED, at most 64 rows a walk at first, doubling to 8,192 while walks
find nothing. Walks go on while the rows they may have read stay below 256
per fit lost; past that the buckets go on alone until more are lost. In
either order, over one queue, a list or every queue (descending: in id
order within a priority, and whole priorities read backwards below it).

Only the function changes; no table or index does.
"""

from __future__ import annotations

from alembic import op

from taskqueue.migrate import load_sql_objects

revision = "0047"
down_revision = "0046"
branch_labels = None
depends_on = None


def upgrade() -> None:
    load_sql_objects(op.get_bind(), "claim_tasks.v33")


def downgrade() -> None:
    load_sql_objects(op.get_bind(), "claim_tasks.v32")
