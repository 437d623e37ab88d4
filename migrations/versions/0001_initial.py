"""Initial schema: tasks, pools and the claim function.

Revision ID: 0001
Revises:
Create Date: 2026-11-22
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

from taskqueue.migrate import load_sql_objects

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

ACTIVE = "state IN ('queued', 'scheduled', 'running')"


def upgrade() -> None:
    op.create_table(
        "tasks",
        sa.Column("id", sa.BigInteger(), sa.Identity(always=False), nullable=False, comment="Task id; FIFO order within a priority."),
        sa.Column("queue", sa.Text(), nullable=False, comment="Queue name; workers serve a set of queues."),
        sa.Column("payload", postgresql.JSONB(), nullable=False, comment="The task's arguments, as JSON."),
        sa.Column("priority", sa.Integer(), nullable=False, comment="Lower is claimed first (signed 32-bit)."),
        sa.Column("required", sa.Integer(), nullable=False, comment="Resources the task needs; a claim takes it only if required <= available."),
        sa.Column("pool", sa.Text(), nullable=True, comment="Concurrency pool (e.g. a /24 network); limits live in pools."),
        sa.Column("state", sa.Text(), nullable=False, comment="queued, scheduled (run_at in the future), running, done, failed or cancelled."),
        sa.Column("attempts", sa.Integer(), server_default=sa.text("0"), nullable=False, comment="Claims so far, the current one included."),
        sa.Column("max_attempts", sa.Integer(), nullable=False, comment="Claims allowed in all, the first run included."),
        sa.Column("run_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False, comment="Earliest time the task may run."),
        sa.Column("created_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False, comment="When it was enqueued."),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=True, comment="When the current or last claim took it."),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True, comment="When it reached done, failed or cancelled."),
        sa.Column("worker", sa.Text(), nullable=True, comment="Name of the worker holding or last holding it."),
        sa.Column("lease_token", sa.Uuid(), nullable=True, comment="Fresh per claim; heartbeat/complete/fail must present it."),
        sa.Column("lease_seconds", sa.Double(), nullable=True, comment="Lease length of the current claim; heartbeats extend by this."),
        sa.Column("lease_expires_at", sa.DateTime(timezone=True), nullable=True, comment="Past this time the task may be rescued."),
        sa.Column("cancel_requested", sa.Boolean(), server_default=sa.text("false"), nullable=False, comment="Set by cancel() on a running task; seen on heartbeat."),
        sa.Column("dedupe_key", sa.Text(), nullable=True, comment="While the task is active, enqueue with the same (queue, key) returns this id."),
        sa.Column("result", postgresql.JSONB(), nullable=True, comment="The handler's return value."),
        sa.Column("error", sa.Text(), nullable=True, comment="Text of the last failure."),
        sa.CheckConstraint("state IN ('queued', 'scheduled', 'running', 'done', 'failed', 'cancelled')", name=op.f("ck_tasks_state_known")),
        sa.CheckConstraint("required >= 0", name=op.f("ck_tasks_required_nonnegative")),
        sa.CheckConstraint("max_attempts >= 1", name=op.f("ck_tasks_max_attempts_positive")),
        sa.CheckConstraint("attempts >= 0 AND attempts <= max_attempts", name=op.f("ck_tasks_attempts_in_range")),
        sa.CheckConstraint("char_length(queue) BETWEEN 1 AND 200", name=op.f("ck_tasks_queue_length")),
        sa.CheckConstraint("pool IS NULL OR char_length(pool) BETWEEN 1 AND 200", name=op.f("ck_tasks_pool_length")),
        sa.CheckConstraint(
            "state <> 'running' OR (lease_token IS NOT NULL AND lease_expires_at IS NOT NULL AND worker IS NOT NULL)",
            name=op.f("ck_tasks_running_has_lease"),
        ),
        sa.CheckConstraint("state = 'running' OR (lease_token IS NULL AND lease_expires_at IS NULL)", name=op.f("ck_tasks_idle_has_no_lease")),
        sa.PrimaryKeyConstraint("id", name="pk_tasks"),
        comment="One row per task. Claimable rows are state = 'queued'; see ix_tasks_claim.",
    )
    op.create_index("ix_tasks_claim", "tasks", ["queue", "priority", "required", "id"], postgresql_where=sa.text("state = 'queued'"))
    op.create_index("ix_tasks_scheduled", "tasks", ["run_at"], postgresql_where=sa.text("state = 'scheduled'"))
    op.create_index("ix_tasks_running", "tasks", ["lease_expires_at"], postgresql_where=sa.text("state = 'running'"))
    op.create_index("ix_tasks_finished", "tasks", ["finished_at"], postgresql_where=sa.text("finished_at IS NOT NULL"))
    op.create_index(
        "uq_tasks_dedupe", "tasks", ["queue", "dedupe_key"], unique=True,
        postgresql_where=sa.text(f"dedupe_key IS NOT NULL AND {ACTIVE}"),
    )
    op.create_table(
        "pools",
        sa.Column("name", sa.Text(), nullable=False, comment="Pool name, as given in tasks.pool."),
        sa.Column("running_limit", sa.Integer(), nullable=True, comment="Most running tasks allowed at once; NULL means no limit."),
        sa.Column("running", sa.Integer(), server_default=sa.text("0"), nullable=False, comment="Tasks of this pool in state running, exactly."),
        sa.CheckConstraint("running >= 0", name=op.f("ck_pools_running_nonnegative")),
        sa.CheckConstraint("running_limit IS NULL OR running_limit >= 0", name=op.f("ck_pools_limit_nonnegative")),
        sa.CheckConstraint("char_length(name) BETWEEN 1 AND 200", name=op.f("ck_pools_name_length")),
        sa.PrimaryKeyConstraint("name", name="pk_pools"),
        comment="Concurrency pools. running is exact at every commit: it changes in the same transaction as the task.",
    )
    # Queue tables churn: vacuum them early and without cost delay.
    op.execute(
        "ALTER TABLE tasks SET (fillfactor = 90, autovacuum_vacuum_scale_factor = 0.01, "
        "autovacuum_analyze_scale_factor = 0.02, autovacuum_vacuum_cost_delay = 0)"
    )
    op.execute(
        "ALTER TABLE pools SET (autovacuum_vacuum_scale_factor = 0.01, "
        "autovacuum_analyze_scale_factor = 0.02, autovacuum_vacuum_cost_delay = 0)"
    )
    load_sql_objects(op.get_bind(), "take_pool_slot.v1", "claim_tasks.v1")


def downgrade() -> None:
    op.execute(sa.text("DROP FUNCTION IF EXISTS claim_tasks(bigint, integer, text[], text, double precision, boolean)"))
    op.execute(sa.text("DROP FUNCTION IF EXISTS take_pool_slot(text, text[])"))
    op.drop_table("pools")
    op.drop_index("uq_tasks_dedupe", table_name="tasks")
    op.drop_index("ix_tasks_finished", table_name="tasks")
    op.drop_index("ix_tasks_running", table_name="tasks")
    op.drop_index("ix_tasks_scheduled", table_name="tasks")
    op.drop_index("ix_tasks_claim", table_name="tasks")
    op.drop_table("tasks")
