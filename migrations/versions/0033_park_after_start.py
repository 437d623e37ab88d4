"""A claim parks only after it has started what it takes; only queued tasks are parked.

Revision ID: 0033
Revises: 0032
Create Date: 2026-11-27

claim_tasks v24: the end of the fit path parked before it started the tasks
it had taken. park_rows v3 (migration 0031) parks the claimable rows right
after those a claim walked past, and a task the claim had taken (locked, its
pool slot held, still queued) could be among them when taking it filled its
pool: it was started parked. Such a task went back to the queue parked when
its lease expired or it was retried, out of the claim index while its pool
had room. Now every path starts first and parks after.

A new invariant view, invariant_parked_not_queued, reports a task that is
parked but not queued; invariant_violations (v3) includes it, and
check --repair clears the flag. The upgrade clears it on every such row and
unparks the queued tasks whose pool has room, as that repair and the
existing one do.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from taskqueue.migrate import load_sql_objects

revision = "0033"
down_revision = "0032"
branch_labels = None
depends_on = None

# What check --repair runs (invariants.sql: unpark_unqueued_tasks, unpark_open_pool_tasks).
CLEAR_UNQUEUED = "UPDATE tasks SET parked = false WHERE parked AND state <> 'queued'"
UNPARK_OPEN = """
UPDATE tasks t SET parked = false
 WHERE t.parked AND t.state = 'queued'
   AND NOT EXISTS (SELECT 1 FROM pools p
                    WHERE p.name = t.pool AND p.running_limit IS NOT NULL AND p.running >= p.running_limit)
"""


def upgrade() -> None:
    load_sql_objects(op.get_bind(), "claim_tasks.v24", "invariant_parked_not_queued.v1", "invariant_violations.v3")
    op.execute(sa.text(CLEAR_UNQUEUED))
    op.execute(sa.text(UNPARK_OPEN))


def downgrade() -> None:
    load_sql_objects(op.get_bind(), "claim_tasks.v23", "invariant_violations.v2")
    op.execute(sa.text("DROP VIEW invariant_parked_not_queued"))
