"""A claim with a list of queues keeps its rows from the shared walk by a hashed lookup of the list.

Revision ID: 0039
Revises: 0038
Create Date: 2026-11-27

claim_tasks v29: the walks over every queue that keep a list's rows (the
look, and step W's window) test "queue IN (SELECT ... FROM unnest(list))"
where they tested "queue = ANY (list)". The claim's statements run as
generic plans, where the list is a parameter, and PostgreSQL 15 hashes
"= ANY" only for a constant array: every row read was compared with every
queue listed, which with 200 listed queues cost five times the walk. An
uncorrelated IN inside an OR stays a subplan, hashed once per statement.

Only the function changes; no table or index does.
"""

from __future__ import annotations

from alembic import op

from taskqueue.migrate import load_sql_objects

revision = "0039"
down_revision = "0038"
branch_labels = None
depends_on = None


def upgrade() -> None:
    load_sql_objects(op.get_bind(), "claim_tasks.v29")


def downgrade() -> None:
    load_sql_objects(op.get_bind(), "claim_tasks.v28")
