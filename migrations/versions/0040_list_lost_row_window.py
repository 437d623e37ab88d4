"""A small listed claim keeps its dry-look hint, and reads on from a row a concurrent claim took.

Revision ID: 0040
Revises: 0039
Create Date: 2026-11-27

claim_tasks v30, a claim over a list of several queues, ascending, with
less than 16 available:
- its session keeps the hint that the look along the shared order ran dry,
  as from 16 up, and its next 15 such claims ask the buckets at once
  (every bucket fits whole there); before, each claim read the look's whole
  budget in vain first;
- a row the buckets found that a concurrent claim then took sends the claim
  to the shared window of the listed queues on from that row, as a
  descending claim has done since v15; before, it asked the buckets again
  from that row, once per lost row.

Only the function changes; no table or index does.
"""

from __future__ import annotations

from alembic import op

from taskqueue.migrate import load_sql_objects

revision = "0040"
down_revision = "0039"
branch_labels = None
depends_on = None


def upgrade() -> None:
    load_sql_objects(op.get_bind(), "claim_tasks.v30")


def downgrade() -> None:
    load_sql_objects(op.get_bind(), "claim_tasks.v29")
