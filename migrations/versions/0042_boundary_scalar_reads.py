"""The boundary of a claim read with scalar aggregates, and its two ways through it in equal turns.

Revision ID: 0042
Revises: 0041
Create Date: 2026-11-28

fit_candidate v10 walks the fine bucket that holds what is available + 1
(claim order) and scans its fitting sizes (size order) as version 9 did,
for less a row: plain aggregates where version 9 built an array for every
row read and sorted the walk's fits and the scan's values, one plain index
range for an ascending walk with no pool known full, and turns of the same
number of rows for the two (the scan had four times the walk's). Measured
where the boundary's fitting and too-big rows are about as many and every
size is its own (bytes_falling, docs/performance.md).

Only the function changes; no table or index does.
"""

from __future__ import annotations

from alembic import op

from taskqueue.migrate import load_sql_objects

revision = "0042"
down_revision = "0041"
branch_labels = None
depends_on = None


def upgrade() -> None:
    load_sql_objects(op.get_bind(), "fit_candidate.v10")


def downgrade() -> None:
    load_sql_objects(op.get_bind(), "fit_candidate.v9")
