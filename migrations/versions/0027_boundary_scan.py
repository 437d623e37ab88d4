"""The boundary of the fit search reads its fitting rows in value order.

Revision ID: 0027
Revises: 0026
Create Date: 2026-11-26

fit_candidate v8: in the fine bucket that holds what is left + 1, a scan of
the fitting rows in (required, priority, id) order takes turns with the walk
in claim order, where the visit paid two probes per distinct value. Where
every fitting row of the boundary has its own size (sizes in bytes, tasks
within 0.2% of what is available on both sides, each with its own priority),
a claim cost more than the naive query's walk: 39 ms against 17 at 200,000
tasks. The first scan's rows tell whether values repeat; where they do, the
visit goes on as before.

Only the function changes; no table or index does.
"""

from __future__ import annotations

from alembic import op

from taskqueue.migrate import load_sql_objects

revision = "0027"
down_revision = "0026"
branch_labels = None
depends_on = None


def upgrade() -> None:
    load_sql_objects(op.get_bind(), "fit_candidate.v8")


def downgrade() -> None:
    load_sql_objects(op.get_bind(), "fit_candidate.v7")
