"""Below 16 left, the fit probes are one per amount, in one small statement.

Revision ID: 0020
Revises: 0019
Create Date: 2026-11-24

fit_candidate v5: when what is left is below 16, every fit level is exact
(a task's bucket is its required amount), so the probes are one per amount
0..left on ix_tasks_fit. Version 4 ran the statement of all four levels for
the same answer: four branches to start and four indexes to open, three of
them for one or two probes each. What is found is unchanged.

Only the function changes; no table or index does.
"""

from __future__ import annotations

from alembic import op

from taskqueue.migrate import load_sql_objects

revision = "0020"
down_revision = "0019"
branch_labels = None
depends_on = None


def upgrade() -> None:
    load_sql_objects(op.get_bind(), "fit_candidate.v5")


def downgrade() -> None:
    load_sql_objects(op.get_bind(), "fit_candidate.v4")
