"""Park the tasks of full pools out of the claim index.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-22
"""

from __future__ import annotations

from pathlib import Path

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None

HERE = Path(__file__).parent


def _run_sql_file(name: str) -> None:
    # Sent as-is through the driver: PL/pgSQL text (%ROWTYPE, :=) is no template.
    with op.get_bind().connection.driver_connection.cursor() as cur:
        cur.execute((HERE / name).read_text())


def upgrade() -> None:
    op.add_column(
        "tasks",
        sa.Column(
            "parked",
            sa.Boolean(),
            server_default=sa.text("false"),
            nullable=False,
            comment="Queued in a full pool and left out of ix_tasks_claim until the pool has room.",
        ),
    )
    op.drop_index("ix_tasks_claim", table_name="tasks")
    op.create_index(
        "ix_tasks_claim", "tasks", ["queue", "priority", "required", "id"],
        postgresql_where=sa.text("state = 'queued' AND NOT parked"),
    )
    op.create_index("ix_tasks_parked", "tasks", ["pool"], postgresql_where=sa.text("parked AND state = 'queued'"))
    op.create_table_comment(
        "tasks", "One row per task. Claimable rows are state = 'queued' and not parked; see ix_tasks_claim."
    )
    _run_sql_file("0003_parked_tasks.sql")


def downgrade() -> None:
    op.execute(sa.text("DROP VIEW IF EXISTS invariant_violations"))
    op.execute(sa.text("DROP VIEW IF EXISTS invariant_parked_in_open_pool"))
    op.execute(sa.text("DROP TRIGGER IF EXISTS unpark_on_delete ON pools"))
    op.execute(sa.text("DROP TRIGGER IF EXISTS unpark_on_free_slot ON pools"))
    op.execute(sa.text("DROP FUNCTION IF EXISTS unpark_tasks()"))
    op.execute(sa.text("DROP FUNCTION IF EXISTS park_tasks(text, integer, integer, text[])"))
    # The claim function and the combined view as revisions 0001 and 0002 made them.
    claim = (HERE / "0001_claim_tasks.sql").read_text()
    claim = claim[claim.index("-- claim_tasks: the resource-fit claim"):]
    views = (HERE / "0002_invariant_views.sql").read_text()
    views = views[views.index("CREATE VIEW invariant_violations AS"):]
    with op.get_bind().connection.driver_connection.cursor() as cur:
        cur.execute(claim.replace("CREATE FUNCTION claim_tasks(", "CREATE OR REPLACE FUNCTION claim_tasks("))
        cur.execute(views)
    op.drop_index("ix_tasks_parked", table_name="tasks")
    op.drop_index("ix_tasks_claim", table_name="tasks")
    op.create_index("ix_tasks_claim", "tasks", ["queue", "priority", "required", "id"], postgresql_where=sa.text("state = 'queued'"))
    op.drop_column("tasks", "parked")
    op.create_table_comment("tasks", "One row per task. Claimable rows are state = 'queued'; see ix_tasks_claim.")
