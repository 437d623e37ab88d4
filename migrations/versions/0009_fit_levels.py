"""The claim reads whole fit buckets at four nested levels, in one statement.

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-23

fit_candidate v2 probed every bucket of required_bucket below the one holding
``available`` (75 probes for an amount near a million: MB, millicores) and
then every fine bucket of the boundary bucket (up to 63 more). Version 3 cuts
the fitting range into whole buckets of four nested levels: required_class
(one per doubling, new), required_bucket (four), required_mid (32, new) and
required_fine (256), so the same amount takes about 27 probes, all in one
statement. Measured on 1,000,000 tasks of sizes 1..1M with available =
500,000: 0.78 ms a call before, 0.37 ms after (docs/performance.md).

claim_tasks v6 reads a window of 64 rows at the head of claim order, not
256, before it asks the buckets: with buckets this cheap, a long window that
finds nothing (a pile of tasks too big for this consumer at the head) cost
more than it could save.

Both new indexes are on expressions, so no table is rewritten; they are
built like any other index (``CREATE INDEX``, which blocks writes while it
builds). Each costs one more index entry per task written.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from taskqueue.migrate import load_sql_objects

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None

CLAIMABLE = "state = 'queued' AND NOT parked"


def upgrade() -> None:
    load_sql_objects(op.get_bind(), "required_class.v1", "required_mid.v1")
    for name, expression in (("ix_tasks_fit_class", "required_class(required)"),
                             ("ix_tasks_fit_mid", "required_mid(required)")):
        op.create_index(name, "tasks", ["queue", sa.text(expression), "priority", "id"],
                        postgresql_where=sa.text(CLAIMABLE))
    load_sql_objects(op.get_bind(), "fit_candidate.v3", "claim_tasks.v6")


def downgrade() -> None:
    load_sql_objects(op.get_bind(), "claim_tasks.v5", "fit_candidate.v2")
    op.drop_index("ix_tasks_fit_mid", table_name="tasks")
    op.drop_index("ix_tasks_fit_class", table_name="tasks")
    op.execute(sa.text("DROP FUNCTION required_mid(integer)"))
    op.execute(sa.text("DROP FUNCTION required_class(integer)"))
