"""The schema as typed SQLAlchemy models; the migrations must build exactly this.

Tables carry no schema name: every connection sets ``search_path`` to the
queue's schema, so one set of models serves any schema name.
"""

from __future__ import annotations

import datetime as dt
import uuid
from typing import Any

from sqlalchemy import (
    BigInteger,
    CheckConstraint,
    Computed,
    DateTime,
    Double,
    ForeignKey,
    Identity,
    Index,
    Integer,
    MetaData,
    SmallInteger,
    Text,
    Uuid,
    text,
)
from sqlalchemy.dialects.postgresql import ARRAY, DOMAIN, JSONB
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

NAMING_CONVENTION = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}

# Kept as one literal so the partial indexes and the claim SQL cannot drift apart.
ACTIVE_STATES_SQL = "state IN ('queued', 'scheduled', 'running')"
CLAIMABLE_SQL = "state = 'queued' AND NOT parked"
# The claim over every queue states "id > 0" (always true: a CHECK says so),
# so that no other statement can use its index (migration 0012): a per-queue
# probe whose statistics made a walk of (priority, id) look as cheap as its
# own index walked the whole table.
CLAIMABLE_ANY_SQL = CLAIMABLE_SQL + " AND id > 0"


# Single-column rules are domains, not table CHECKs (migration 0017):
# PostgreSQL 15 plans every table CHECK again on each statement that writes
# the table, a third of a claim's work, while a domain's rules are cached
# per session and checked only where a value is assigned. Rules that tie
# columns together stay table CHECKs.
TASK_STATE = DOMAIN(
    "task_state",
    Text,
    constraint_name="task_state_known",
    check="VALUE IN ('queued', 'scheduled', 'running', 'done', 'failed', 'cancelled')",
)
SHORT_NAME = DOMAIN(
    "short_name", Text, constraint_name="short_name_length", check="char_length(VALUE) BETWEEN 1 AND 200"
)
ATTEMPT_LIMIT = DOMAIN("attempt_limit", Integer, constraint_name="attempt_limit_positive", check="VALUE >= 1")
ATTEMPT_COUNT = DOMAIN("attempt_count", Integer, constraint_name="attempt_count_nonnegative", check="VALUE >= 0")
SECONDS_ESTIMATE = DOMAIN(
    "seconds_estimate",
    Double,
    constraint_name="seconds_estimate_finite",
    check="VALUE >= 0 AND VALUE < 'Infinity'",
)
POOL_COUNT = DOMAIN("pool_count", Integer, constraint_name="pool_count_nonnegative", check="VALUE >= 0")


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING_CONVENTION)


class TaskRow(Base):
    __tablename__ = "tasks"
    __table_args__ = (
        CheckConstraint("required >= 0", name="required_nonnegative"),
        CheckConstraint("id > 0", name="id_positive"),
        CheckConstraint("attempts <= max_attempts", name="attempts_in_range"),
        CheckConstraint(
            "state <> 'running' OR (lease_token IS NOT NULL AND lease_expires_at IS NOT NULL AND worker IS NOT NULL)",
            name="running_has_lease",
        ),
        CheckConstraint(
            "state = 'running' OR (lease_token IS NULL AND lease_expires_at IS NULL)", name="idle_has_no_lease"
        ),
        # The claim indexes (see claim_tasks.v22.sql). Parked tasks (queued in
        # a full pool) are left out until the pool has room.
        # Claim order, for the window at the head.
        Index("ix_tasks_claim", "queue", "priority", "id", postgresql_where=text(CLAIMABLE_SQL)),
        # The same order over every queue, for a claim given no queue list (migration 0011).
        Index("ix_tasks_claim_any", "priority", "id", postgresql_where=text(CLAIMABLE_ANY_SQL)),
        # Its descending order, (priority DESC, id), for order="max" over every queue or a list (migration 0030).
        Index("ix_tasks_claim_desc", text("priority DESC"), "id", postgresql_where=text(CLAIMABLE_ANY_SQL)),
        # The fit levels, coarse to fine (see fit_candidate.v11.sql): each whole
        # bucket's best task in one probe. One per doubling (migration 0009):
        Index(
            "ix_tasks_fit_class",
            "queue",
            text("required_class(required)"),
            "priority",
            "id",
            postgresql_where=text(CLAIMABLE_SQL),
        ),
        # Four per doubling, stored in tasks.bucket:
        Index("ix_tasks_fit", "queue", "bucket", "priority", "id", postgresql_where=text(CLAIMABLE_SQL)),
        # 32 per doubling (migration 0009):
        Index(
            "ix_tasks_fit_mid",
            "queue",
            text("required_mid(required)"),
            "priority",
            "id",
            postgresql_where=text(CLAIMABLE_SQL),
        ),
        # 256 per doubling (migration 0007). It carries each task's size and pool, so the
        # boundary's walk reads no table row, and only fit_candidate's fine statements state
        # its last predicate term, so no other statement is planned on it (migration 0043).
        Index(
            "ix_tasks_fit_fine",
            "queue",
            text("required_fine(required)"),
            "priority",
            "id",
            postgresql_include=["required", "pool"],
            postgresql_where=text(CLAIMABLE_SQL + " AND lease_token IS NULL"),
        ),
        # The fine boundary bucket's fitting range, scanned in value order or one probe per distinct value.
        Index("ix_tasks_fit_exact", "queue", "required", "priority", "id", postgresql_where=text(CLAIMABLE_SQL)),
        # Every queue's fits in one range, for few_fits over every queue (migration 0053): with the
        # queue column first, a claim over 1,000 queues read 1,000 ranges. A claim over every queue
        # with less than 16 left probes it once per amount (ix_tasks_fit_small_any did, 0028-0052).
        Index("ix_tasks_fit_any_exact", "required", "priority", "id", postgresql_where=text(CLAIMABLE_ANY_SQL)),
        Index("ix_tasks_parked", "pool", postgresql_where=text("parked AND state = 'queued'")),
        Index("ix_tasks_scheduled", "run_at", postgresql_where=text("state = 'scheduled'")),
        Index("ix_tasks_running", "lease_expires_at", postgresql_where=text("state = 'running'")),
        Index("ix_tasks_finished", "finished_at", postgresql_where=text("finished_at IS NOT NULL")),
        # Failures for the dashboard and the metrics (migration 0006): failed
        # tasks and waiting ones that failed an attempt; nothing else.
        Index(
            "ix_tasks_errored",
            "state",
            "queue",
            "priority",
            "id",
            postgresql_where=text(
                "state = 'failed' OR (error IS NOT NULL AND state IN ('queued', 'scheduled') AND attempts > 0)"
            ),
        ),
        Index(
            "uq_tasks_dedupe",
            "queue",
            "dedupe_key",
            unique=True,
            postgresql_where=text(f"dedupe_key IS NOT NULL AND {ACTIVE_STATES_SQL}"),
        ),
        {"comment": "One row per task. Claimable rows are state = 'queued' and not parked; see ix_tasks_claim."},
    )

    id: Mapped[int] = mapped_column(BigInteger, Identity(always=False), primary_key=True, comment="Task id; FIFO order within a priority.")
    queue: Mapped[str] = mapped_column(SHORT_NAME, comment="Queue name; workers serve a set of queues.")
    payload: Mapped[Any] = mapped_column(JSONB, comment="The task's arguments, as JSON.")
    priority: Mapped[int] = mapped_column(Integer, comment="Lower is claimed first (signed 32-bit).")
    required: Mapped[int] = mapped_column(Integer, comment="Resources the task needs; a claim takes it only if required <= available.")
    pool: Mapped[str | None] = mapped_column(SHORT_NAME, comment="Concurrency pool (e.g. a /24 network); limits live in pools.")
    state: Mapped[str] = mapped_column(TASK_STATE, comment="queued, scheduled (run_at in the future), running, done, failed or cancelled.")
    attempts: Mapped[int] = mapped_column(ATTEMPT_COUNT, server_default=text("0"), comment="Claims so far, the current one included.")
    max_attempts: Mapped[int] = mapped_column(ATTEMPT_LIMIT, comment="Claims allowed in all, the first run included.")
    run_at: Mapped[dt.datetime] = mapped_column(DateTime(timezone=True), server_default=text("now()"), comment="Earliest time the task may run.")
    created_at: Mapped[dt.datetime] = mapped_column(DateTime(timezone=True), server_default=text("now()"), comment="When it was enqueued.")
    started_at: Mapped[dt.datetime | None] = mapped_column(DateTime(timezone=True), comment="When the current or last claim took it.")
    finished_at: Mapped[dt.datetime | None] = mapped_column(DateTime(timezone=True), comment="When it reached done, failed or cancelled.")
    worker: Mapped[str | None] = mapped_column(Text, comment="Name of the worker holding or last holding it.")
    lease_token: Mapped[uuid.UUID | None] = mapped_column(Uuid, comment="Fresh per claim; heartbeat/complete/fail must present it.")
    lease_seconds: Mapped[float | None] = mapped_column(Double, comment="Lease length of the current claim; heartbeats extend by this.")
    lease_expires_at: Mapped[dt.datetime | None] = mapped_column(DateTime(timezone=True), comment="Past this time the task may be rescued.")
    cancel_requested: Mapped[bool] = mapped_column(server_default=text("false"), comment="Set by cancel() on a running task; seen on heartbeat.")
    dedupe_key: Mapped[str | None] = mapped_column(Text, comment="While the task is active, enqueue with the same (queue, key) returns this id.")
    result: Mapped[Any | None] = mapped_column(JSONB, comment="The handler's return value.")
    error: Mapped[str | None] = mapped_column(Text, comment="Text of the last failure.")
    bucket: Mapped[int] = mapped_column(SmallInteger, Computed("required_bucket(required)", persisted=True), comment="required_bucket(required): exact below 16, four per doubling above; kept by PostgreSQL.")
    parked: Mapped[bool] = mapped_column(server_default=text("false"), comment="Queued in a full pool and left out of ix_tasks_claim until the pool has room.")
    estimate: Mapped[float | None] = mapped_column(SECONDS_ESTIMATE, comment="Expected run time in seconds, given at enqueue; NULL: use the queue's learnt estimate.")


class PoolRow(Base):
    __tablename__ = "pools"
    __table_args__ = (
        {"comment": "Concurrency pools. running is exact at every commit: it changes in the same transaction as the task."},
    )

    name: Mapped[str] = mapped_column(SHORT_NAME, primary_key=True, comment="Pool name, as given in tasks.pool.")
    running_limit: Mapped[int | None] = mapped_column(POOL_COUNT, comment="Most running tasks allowed at once; NULL means no limit.")
    running: Mapped[int] = mapped_column(POOL_COUNT, server_default=text("0"), comment="Tasks of this pool in state running, exactly.")
    limit_changed_at: Mapped[dt.datetime | None] = mapped_column(DateTime(timezone=True), comment="When running_limit was last set; claims since then all saw it.")
    freed_at: Mapped[dt.datetime | None] = mapped_column(DateTime(timezone=True), comment="When the pool last went from full to having room; its tasks are not parked for a second after.")
    parked_open: Mapped[bool] = mapped_column(server_default=text("false"), comment="The pool has room and some of its tasks are still parked, each behind as many unparked ones as it has free slots (unpark_behind).")


class WorkerRow(Base):
    __tablename__ = "workers"
    __table_args__ = (
        CheckConstraint("policy IN ('greedy', 'strict', 'backfill')", name="policy_known"),
        CheckConstraint("capacity IS NULL OR capacity >= 0", name="capacity_nonnegative"),
        CheckConstraint("in_use >= 0 AND running >= 0", name="usage_nonnegative"),
        {
            "comment": "Live workers, kept by their heartbeats. A row whose expires_at passed is a dead worker's; "
            "reads ignore it and the maintenance leader deletes it."
        },
    )

    name: Mapped[str] = mapped_column(Text, primary_key=True, comment="Worker name, as in tasks.worker (default host:pid).")
    host: Mapped[str] = mapped_column(Text, comment="Host name the worker process runs on.")
    pid: Mapped[int] = mapped_column(Integer, comment="Process id on that host.")
    queues: Mapped[list[str] | None] = mapped_column(ARRAY(Text), comment="Queues it claims from; NULL means every queue.")
    capacity: Mapped[int | None] = mapped_column(BigInteger, comment="Sum of required it may run at once; NULL means no bound.")
    in_use: Mapped[int] = mapped_column(BigInteger, server_default=text("0"), comment="Sum of required of its running tasks at the last heartbeat.")
    running: Mapped[int] = mapped_column(Integer, server_default=text("0"), comment="Its running tasks at the last heartbeat.")
    policy: Mapped[str] = mapped_column(Text, comment="Scheduling policy: greedy, strict or backfill.")
    started_at: Mapped[dt.datetime] = mapped_column(DateTime(timezone=True), server_default=text("now()"), comment="When this worker registered.")
    last_seen_at: Mapped[dt.datetime] = mapped_column(DateTime(timezone=True), server_default=text("now()"), comment="Its last heartbeat.")
    expires_at: Mapped[dt.datetime] = mapped_column(DateTime(timezone=True), comment="Past this time the worker counts as dead and every read ignores the row.")


class ReservationRow(Base):
    __tablename__ = "reservations"
    __table_args__ = (
        Index("ix_reservations_task_id", "task_id"),
        {
            "comment": "Capacity held back for a waiting task. It lives as long as its worker's row: a dead worker's "
            "reservation is ignored at once and deleted with the row."
        },
    )

    worker: Mapped[str] = mapped_column(
        Text, ForeignKey("workers.name", ondelete="CASCADE"), primary_key=True,
        comment="The worker holding back capacity; one reservation per worker at most.",
    )
    task_id: Mapped[int] = mapped_column(BigInteger, comment="The queued task it holds capacity back for (no foreign key: the task may be claimed or pruned meanwhile).")
    required: Mapped[int] = mapped_column(BigInteger, comment="The task's required, as the worker saw it.")
    queue: Mapped[str] = mapped_column(Text, comment="The task's queue.")
    since: Mapped[dt.datetime] = mapped_column(DateTime(timezone=True), server_default=text("now()"), comment="When this worker first reserved this task.")
    start_by: Mapped[dt.datetime | None] = mapped_column(DateTime(timezone=True), comment="When the worker expects to start it, from its running tasks' expected ends.")


class QueueEstimateRow(Base):
    __tablename__ = "queue_estimates"
    __table_args__ = (
        CheckConstraint("finished >= 1 AND mean_seconds >= 0", name="sane"),
        {
            "comment": "Learnt run time per queue, kept by the completion statements; "
            "the estimate of a queue is the finished-weighted mean over its slots."
        },
    )

    queue: Mapped[str] = mapped_column(Text, primary_key=True, comment="Queue name.")
    slot: Mapped[int] = mapped_column(SmallInteger, primary_key=True, comment="Shard of the statistics, chosen by the completing worker, so completions do not queue on one row.")
    finished: Mapped[int] = mapped_column(BigInteger, comment="Tasks done through this slot.")
    mean_seconds: Mapped[float] = mapped_column(Double, comment="Exponentially weighted mean run time (finished_at - started_at) of those tasks.")
    updated_at: Mapped[dt.datetime] = mapped_column(DateTime(timezone=True), server_default=text("now()"), comment="Last completion folded in.")
