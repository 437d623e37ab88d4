"""A descending walk of the boundary that ends short, in the best's priority, ends the search.

Revision ID: 0022
Revises: 0021
Create Date: 2026-11-24

fit_candidate v6: a walk of the boundary bucket that reads fewer rows than
its budget has read every row before the best found so far, in ascending
order always, and in descending order when the best is in the walk's own
priority (the walk is bounded by the best's id there and steps into no
lower priority). Version 5 stopped there only in ascending order; in
descending order it went on to visit the bucket's values and walk again,
which made a descending call cost about twice an ascending one on the same
rows. What is found is unchanged.

Only the function changes; no table or index does.
"""

from __future__ import annotations

from alembic import op

from taskqueue.migrate import load_sql_objects

revision = "0022"
down_revision = "0021"
branch_labels = None
depends_on = None


def upgrade() -> None:
    load_sql_objects(op.get_bind(), "fit_candidate.v6")


def downgrade() -> None:
    load_sql_objects(op.get_bind(), "fit_candidate.v5")
