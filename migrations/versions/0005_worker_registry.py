"""Worker registry, reservations, task estimates and the learnt per-queue estimate.

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-23

Workers see each other so that a fleet can schedule fairly (seed 003): each
live worker keeps a row in ``workers`` by its heartbeat, and may hold one
reservation ("I am holding back capacity for task T") in ``reservations``.
A row whose ``expires_at`` has passed belongs to a dead worker: every read
ignores it at once, and the maintenance leader deletes it later, which takes
its reservation with it (ON DELETE CASCADE).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

from taskqueue.migrate import load_sql_objects

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None

TZ = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.add_column(
        "tasks",
        sa.Column(
            "estimate",
            sa.Double(),
            nullable=True,
            comment="Expected run time in seconds, given at enqueue; NULL: use the queue's learnt estimate.",
        ),
    )
    op.create_check_constraint(
        op.f("ck_tasks_estimate_finite"), "tasks", "estimate IS NULL OR (estimate >= 0 AND estimate < 'Infinity')"
    )

    op.create_table(
        "workers",
        sa.Column("name", sa.Text(), nullable=False, comment="Worker name, as in tasks.worker (default host:pid)."),
        sa.Column("host", sa.Text(), nullable=False, comment="Host name the worker process runs on."),
        sa.Column("pid", sa.Integer(), nullable=False, comment="Process id on that host."),
        sa.Column("queues", postgresql.ARRAY(sa.Text()), nullable=True, comment="Queues it claims from; NULL means every queue."),
        sa.Column("capacity", sa.BigInteger(), nullable=True, comment="Sum of required it may run at once; NULL means no bound."),
        sa.Column("in_use", sa.BigInteger(), server_default=sa.text("0"), nullable=False, comment="Sum of required of its running tasks at the last heartbeat."),
        sa.Column("running", sa.Integer(), server_default=sa.text("0"), nullable=False, comment="Its running tasks at the last heartbeat."),
        sa.Column("policy", sa.Text(), nullable=False, comment="Scheduling policy: greedy, strict or backfill."),
        sa.Column("started_at", TZ, server_default=sa.text("now()"), nullable=False, comment="When this worker registered."),
        sa.Column("last_seen_at", TZ, server_default=sa.text("now()"), nullable=False, comment="Its last heartbeat."),
        sa.Column("expires_at", TZ, nullable=False, comment="Past this time the worker counts as dead and every read ignores the row."),
        sa.CheckConstraint("policy IN ('greedy', 'strict', 'backfill')", name=op.f("ck_workers_policy_known")),
        sa.CheckConstraint("capacity IS NULL OR capacity >= 0", name=op.f("ck_workers_capacity_nonnegative")),
        sa.CheckConstraint("in_use >= 0 AND running >= 0", name=op.f("ck_workers_usage_nonnegative")),
        sa.PrimaryKeyConstraint("name", name="pk_workers"),
        comment="Live workers, kept by their heartbeats. A row whose expires_at passed is a dead worker's; "
        "reads ignore it and the maintenance leader deletes it.",
    )
    op.create_table(
        "reservations",
        sa.Column("worker", sa.Text(), nullable=False, comment="The worker holding back capacity; one reservation per worker at most."),
        sa.Column("task_id", sa.BigInteger(), nullable=False, comment="The queued task it holds capacity back for (no foreign key: the task may be claimed or pruned meanwhile)."),
        sa.Column("required", sa.BigInteger(), nullable=False, comment="The task's required, as the worker saw it."),
        sa.Column("queue", sa.Text(), nullable=False, comment="The task's queue."),
        sa.Column("since", TZ, server_default=sa.text("now()"), nullable=False, comment="When this worker first reserved this task."),
        sa.Column("start_by", TZ, nullable=True, comment="When the worker expects to start it, from its running tasks' expected ends."),
        sa.ForeignKeyConstraint(["worker"], ["workers.name"], name=op.f("fk_reservations_worker_workers"), ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("worker", name="pk_reservations"),
        comment="Capacity held back for a waiting task. It lives as long as its worker's row: a dead worker's "
        "reservation is ignored at once and deleted with the row.",
    )
    op.create_index("ix_reservations_task_id", "reservations", ["task_id"])
    op.create_table(
        "queue_estimates",
        sa.Column("queue", sa.Text(), nullable=False, comment="Queue name."),
        sa.Column("slot", sa.SmallInteger(), nullable=False, comment="Shard of the statistics, chosen by the completing worker, so completions do not queue on one row."),
        sa.Column("finished", sa.BigInteger(), nullable=False, comment="Tasks done through this slot."),
        sa.Column("mean_seconds", sa.Double(), nullable=False, comment="Exponentially weighted mean run time (finished_at - started_at) of those tasks."),
        sa.Column("updated_at", TZ, server_default=sa.text("now()"), nullable=False, comment="Last completion folded in."),
        sa.CheckConstraint("finished >= 1 AND mean_seconds >= 0", name=op.f("ck_queue_estimates_sane")),
        sa.PrimaryKeyConstraint("queue", "slot", name="pk_queue_estimates"),
        comment="Learnt run time per queue, kept by the completion statements; "
        "the estimate of a queue is the finished-weighted mean over its slots.",
    )
    # Rows are rewritten every heartbeat or completion: leave room for HOT updates, vacuum early.
    op.execute("ALTER TABLE workers SET (fillfactor = 50, autovacuum_vacuum_scale_factor = 0.01, autovacuum_vacuum_cost_delay = 0)")
    op.execute("ALTER TABLE reservations SET (fillfactor = 50, autovacuum_vacuum_scale_factor = 0.01, autovacuum_vacuum_cost_delay = 0)")
    op.execute("ALTER TABLE queue_estimates SET (fillfactor = 50, autovacuum_vacuum_scale_factor = 0.01, autovacuum_vacuum_cost_delay = 0)")
    load_sql_objects(op.get_bind(), "waiting_heads.v1")

def downgrade() -> None:
    op.execute(sa.text("DROP FUNCTION IF EXISTS waiting_heads(text[], integer, boolean)"))
    op.drop_table("queue_estimates")
    op.drop_index("ix_reservations_task_id", table_name="reservations")
    op.drop_table("reservations")
    op.drop_table("workers")
    op.drop_constraint(op.f("ck_tasks_estimate_finite"), "tasks", type_="check")
    op.drop_column("tasks", "estimate")
