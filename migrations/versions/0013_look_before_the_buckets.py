"""A single claim looks along claim order, up to a budget, before it asks the buckets.

Revision ID: 0013
Revises: 0012
Create Date: 2026-11-23

claim_tasks v9 read the first 8 rows of claim order, then a 64-row window
through a cursor, then asked the fit buckets. On a head that holds a pile
of tasks too big for the claim (one queue, sizes 1..1M, half fit: each
claim takes the oldest task that fits, so the ones that do not pile up in
front), the naive query walks the pile at a fraction of a microsecond a
row, while v9 paid the window and the buckets, about 0.8 ms of server time,
as soon as the pile was longer than 72 rows. With 8 consumers the buckets
sent all of them to the same task, and each claim called take_task about
2.5 times.

claim_tasks v10 replaces the 8-row head with a look: one plain statement
reads on from the last settled key until 8 rows fit or a budget is spent
(32 rows per class below what is left + 1, about what asking the buckets
costs), and locks and starts the first fitting row no one holds, as the
head did. Over one queue, when the look finds nothing, the buckets find
the next task that fits and the look runs again from there, so concurrent
claims take the fits after it in one statement each.

A session remembers a look that ran dry over one queue (the setting
taskqueue.dry_look): the next 15 claims of no larger an amount ask the
buckets at once, then one looks again. In a pile that grows by one task a
claim, a look past its budget is a statement in vain. The hint skips a
statement, never a row, so it cannot change what a claim takes.

Only the function changes; no table or index does.
"""

from __future__ import annotations

from alembic import op

from taskqueue.migrate import load_sql_objects

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None


def upgrade() -> None:
    load_sql_objects(op.get_bind(), "claim_tasks.v10")


def downgrade() -> None:
    load_sql_objects(op.get_bind(), "claim_tasks.v9")
