"""A pool that has had room before is parked only as far as its next release can unpark quickly.

Revision ID: 0045
Revises: 0044
Create Date: 2026-11-28

Every release that gives a full pool room unparks all its parked tasks in
its own transaction, about 85 us a row. A pool of limit 1 whose tasks run
2 s, with 20,000 of them queued, had its whole backlog parked between
releases, and each release took 1.4-1.8 s. pools.parked_count counts what
the claims parked since the pool last had room (reset by mark_pool_freed v2,
in the row update that frees it), and park_rows v6 parks a pool with a
freed_at at most 1,000 rows for each second it has been full past the quiet
one. See docs/performance.md, "a release that unparks no more than its pool's
full time pays for (migration 0045)".
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from taskqueue.migrate import load_sql_objects

revision = "0045"
down_revision = "0044"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column(
        "pools",
        sa.Column(
            "parked_count",
            sa.BigInteger(),
            server_default=sa.text("0"),
            nullable=False,
            comment="Tasks parked since the pool last had room (an upper bound: a parked task cancelled stays "
            "counted); 0 again when it frees.",
        ),
    )
    load_sql_objects(op.get_bind(), "mark_pool_freed.v2", "park_rows.v6")


def downgrade() -> None:
    load_sql_objects(op.get_bind(), "park_rows.v5")
    op.execute(sa.text("DROP FUNCTION pool_park_room(timestamptz, bigint, interval, integer)"))
    op.execute(sa.text("DROP TRIGGER mark_freed_on_free_slot ON pools"))
    load_sql_objects(op.get_bind(), "mark_pool_freed.v1")
    op.drop_column("pools", "parked_count")
