"""One task claimed in descending order over one queue looks along claim order as an ascending claim does.

Revision ID: 0048
Revises: 0047
Create Date: 2026-11-29

claim_tasks v34. Step D read a window of two priorities at most (the rest
of the current one and the next) and then asked the buckets. Where each
priority holds a few tasks and those too big pile up at the head, every
claim fell to fit_candidate: priorities that are epoch seconds, 2-3 tasks
each, sizes rising with id, 90% fitting, ran at 0.56x the naive query.
The look reads claim order (priority DESC, id) from ix_tasks_claim: the
rest of the current priority and the next one (a statement of its own),
then chunks read backwards, 8 rows doubling to 512, whose whole priorities
are sorted into claim order, within the budget the ascending look has (32
rows a class).

Only the function changes; no table or index does.
"""

from __future__ import annotations

from alembic import op

from taskqueue.migrate import load_sql_objects

revision = "0048"
down_revision = "0047"
branch_labels = None
depends_on = None


def upgrade() -> None:
    load_sql_objects(op.get_bind(), "claim_tasks.v34")


def downgrade() -> None:
    load_sql_objects(op.get_bind(), "claim_tasks.v33")
