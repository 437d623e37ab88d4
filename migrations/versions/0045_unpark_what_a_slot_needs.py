"""A pool that gets room unparks only the tasks a claim could need, not its whole backlog.

Revision ID: 0045
Revises: 0044
Create Date: 2026-11-28

Until now every release of a full pool put its whole parked backlog back
into the claim indexes, in the releasing transaction: about 85 µs a row, so
1.7 s for a pool of limit 1 with 20,000 tasks waiting, on every release,
while the slot stayed unused. One free slot is taken by one claim, so a
parked task may stay parked while, in its pool and queue, as many unparked
tasks as the pool has free slots come before it in both claim orders and
need no more than it does: whatever claim it would fit takes those first.
unpark_behind finds them (the staircase of running minima of `required`,
per queue and order, one layer per free slot added); reopen_pool, a BEFORE
UPDATE trigger on pools, calls it whenever the pool gains room and records
in pools.parked_open whether any task stays parked. A cancelled queued task
of such a pool peels one more layer (cancel_task). The invariant view
parked_in_open_pool (v2) checks the new rule, with parked_out_of_reach
walking each such pool's queued tasks once per claim order.

Parked tasks are all in full pools before this revision, so the upgrade
changes no task. The downgrade puts back every parked task of a pool with
room, which the old rule needs.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from taskqueue.migrate import load_sql_objects

revision = "0045"
down_revision = "0044"
branch_labels = None
depends_on = None

UNPARK_OPEN = """
UPDATE tasks t SET parked = false
 WHERE t.parked AND t.state = 'queued'
   AND NOT EXISTS (SELECT 1 FROM pools p
                    WHERE p.name = t.pool AND p.running_limit IS NOT NULL AND p.running >= p.running_limit)
"""


def upgrade() -> None:
    op.add_column(
        "pools",
        sa.Column(
            "parked_open",
            sa.Boolean(),
            nullable=False,
            server_default=sa.text("false"),
            comment="The pool has room and some of its tasks are still parked, each behind as many unparked ones "
            "as it has free slots (unpark_behind).",
        ),
    )
    load_sql_objects(op.get_bind(), "unpark_behind.v1", "reopen_pool.v1", "pool_triggers.v2",
                     "parked_out_of_reach.v1", "invariant_parked_in_open_pool.v2")


def downgrade() -> None:
    op.execute(sa.text("DROP TRIGGER reopen_on_free_slot ON pools"))
    op.execute(sa.text("DROP TRIGGER unpark_on_delete ON pools"))
    load_sql_objects(op.get_bind(), "unpark_triggers.v1", "invariant_parked_in_open_pool.v1")
    op.execute(sa.text(UNPARK_OPEN))
    op.execute(sa.text("DROP FUNCTION parked_out_of_reach()"))
    op.execute(sa.text("DROP FUNCTION reopen_pool()"))
    op.execute(sa.text("DROP FUNCTION unpark_behind(text, integer)"))
    op.drop_column("pools", "parked_open")
