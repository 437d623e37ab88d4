"""The walk of the boundary takes a lead over the scan when the scan has far to go.

Revision ID: 0062
Revises: 0061
Create Date: 2026-12-01

fit_candidate v15. In the fine bucket that holds what is available, the walk
in claim order and the scan in value order took equal turns. After its first
turn the scan now estimates the fitting rows it has left (the share of the
fitting range its rows covered), and its next turn waits until the walk has
read an eighth of that estimate more than the scan, at most 64 times the
scan's rows: where the tasks too big pile up at the head and every fit has
its own size (sizes in bytes, 30% fitting, descending), the walk passes the
pile and the scan's turns read rows that could not change the answer.
"""

from __future__ import annotations

from alembic import op

from taskqueue.migrate import load_sql_objects

revision = "0062"
down_revision = "0061"
branch_labels = None
depends_on = None


def upgrade() -> None:
    load_sql_objects(op.get_bind(), "fit_candidate.v15")


def downgrade() -> None:
    load_sql_objects(op.get_bind(), "fit_candidate.v14")
