"""Every probe of fit_candidate is one that only its level's index answers in order.

Revision ID: 0023
Revises: 0022
Create Date: 2026-11-24

fit_candidate v7: a probe for the best task of a bucket was written as
``level = n AND (priority, id) > key ORDER BY priority, id``. The equality
makes the level a constant to the planner, so any index on ``(priority,
id)`` gave that order too, and where statistics said a level held a single
value (every task the same size) its estimate tied with the level index's.
With such an index on the table (a user's own, or the benchmark's naive
one), the planner could pick it and probe an empty bucket by walking every
queued task: 500 ms a call at 1,000,000 tasks. Each probe now leads with
the level, ``(level, priority, id) > (n, key) AND level <= n ORDER BY
level, priority, id``, which only the level's own index can give in order.
What is found is unchanged.

Only the function changes; no table or index does.
"""

from __future__ import annotations

from alembic import op

from taskqueue.migrate import load_sql_objects

revision = "0023"
down_revision = "0022"
branch_labels = None
depends_on = None


def upgrade() -> None:
    load_sql_objects(op.get_bind(), "fit_candidate.v7")


def downgrade() -> None:
    load_sql_objects(op.get_bind(), "fit_candidate.v6")
