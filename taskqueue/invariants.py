"""The invariant checker: what must hold in the queue tables at every commit.

The checks are SQL views (migration 0002), so operators can query them
without Python; this module reads all of them in one REPEATABLE READ snapshot
and, on request, repairs what can be repaired in one transaction.
"""

from __future__ import annotations

import datetime as dt
import logging
import time
from dataclasses import dataclass, field
from typing import Any

import psycopg.errors
import sqlalchemy as sa

from .store import Store

log = logging.getLogger("taskqueue.invariants")

#: Every check, in report order, with the invariant it guards.
CHECKS: dict[str, str] = {
    "pool_counts": "every pool's stored running count equals the number of its running tasks",
    "pool_over_limit": "no pool runs more tasks than its limit (unless the limit was lowered while they ran)",
    "running_without_lease": "every running task has a lease and a worker",
    "finished_with_lease": "no task that is not running holds a lease",
    "attempts_exceeded": "attempts never exceed max_attempts",
    "overdue_scheduled": "no scheduled task is overdue by more than 5 seconds while claims run",
    "parked_in_open_pool": "a parked task's pool exists and is full (else it is stranded out of the claim index)",
}

SEVERITIES = ("violation", "warning")
#: Longest wait for a lock during a repair; below PostgreSQL's deadlock_timeout (1 s).
REPAIR_LOCK_TIMEOUT_MS = 200


@dataclass(frozen=True, slots=True)
class Violation:
    """The rows of one check at one severity; each row carries its own ``description``."""

    check: str
    severity: str
    rows: tuple[dict[str, Any], ...]

    @property
    def invariant(self) -> str:
        return CHECKS[self.check]

    @property
    def descriptions(self) -> list[str]:
        return [str(r["description"]) for r in self.rows]

    def to_dict(self) -> dict[str, Any]:
        return {
            "check": self.check,
            "severity": self.severity,
            "invariant": self.invariant,
            "rows": [_jsonable(r) for r in self.rows],
        }


@dataclass(frozen=True, slots=True)
class Repair:
    """One change made by ``check(repair=True)``."""

    action: str
    subject: str
    detail: str

    def to_dict(self) -> dict[str, str]:
        return {"action": self.action, "subject": self.subject, "detail": self.detail}


@dataclass(frozen=True, slots=True)
class CheckReport:
    """The outcome of ``TaskQueue.check()``.

    ``violations`` and ``warnings`` describe the database as of ``checked_at``;
    with ``repair=True`` that is the state after the repair, ``repaired`` lists
    what was changed and ``found_before_repair`` what the first pass saw.
    """

    checked_at: dt.datetime
    violations: tuple[Violation, ...]
    warnings: tuple[Violation, ...] = ()
    repaired: tuple[Repair, ...] = ()
    found_before_repair: tuple[Violation, ...] = field(default=())

    @property
    def ok(self) -> bool:
        return not self.violations

    def of(self, check: str) -> list[dict[str, Any]]:
        """Every row (violations and warnings) of one check."""
        if check not in CHECKS:
            raise KeyError(check)
        return [r for v in (*self.violations, *self.warnings) if v.check == check for r in v.rows]

    def to_dict(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "checked_at": self.checked_at.isoformat(),
            "violations": [v.to_dict() for v in self.violations],
            "warnings": [v.to_dict() for v in self.warnings],
            "repaired": [r.to_dict() for r in self.repaired],
            "found_before_repair": [v.to_dict() for v in self.found_before_repair],
        }


def _jsonable(row: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in row.items():
        if isinstance(value, (dt.datetime, dt.date)):
            value = value.isoformat()
        elif value is not None and not isinstance(value, (bool, int, float, str)):
            value = str(value)
        out[key] = value
    return out


def read_snapshot(engine: sa.Engine, store: Store) -> CheckReport:
    """Run every check in one REPEATABLE READ transaction, so they see one commit state."""
    with engine.connect().execution_options(isolation_level="REPEATABLE READ") as conn:
        with conn.begin():
            checked_at = store.database_now(conn)
            found = {check: store.invariant_rows(conn, check) for check in CHECKS}
    violations: list[Violation] = []
    warnings: list[Violation] = []
    for check, rows in found.items():
        for severity, into in (("violation", violations), ("warning", warnings)):
            picked = tuple(r for r in rows if r["severity"] == severity)
            if picked:
                into.append(Violation(check, severity, picked))
    return CheckReport(checked_at, tuple(violations), tuple(warnings))


def apply_repairs(engine: sa.Engine, store: Store, *, attempts: int = 20) -> list[Repair]:
    """Fix what can be fixed, in one READ COMMITTED transaction; safe while workers run.

    Task rows first, pool rows last (all of them, in name order). A claim
    that waited for a pool row and then found the pool full still holds that
    row (PostgreSQL keeps the lock of a row whose re-check failed), so a
    repair that waits for locks could close a deadlock with claims. It waits
    at most REPAIR_LOCK_TIMEOUT_MS for any lock instead, which is shorter than
    the deadlock detector's delay: the repair gives up, never the workload,
    and runs again.
    """
    for attempt in range(1, attempts + 1):
        try:
            return _repair_once(engine, store)
        except sa.exc.OperationalError as exc:
            retryable = isinstance(exc.orig, (psycopg.errors.LockNotAvailable, psycopg.errors.DeadlockDetected))
            if not retryable or attempt == attempts:
                raise
            log.info("repair yielded to a concurrent transaction; running it again")
            time.sleep(min(0.5, 0.02 * attempt))
    raise AssertionError("unreachable")  # pragma: no cover


def _repair_once(engine: sa.Engine, store: Store) -> list[Repair]:
    done: list[Repair] = []
    with engine.begin() as conn:
        store.set_local_lock_timeout(conn, REPAIR_LOCK_TIMEOUT_MS)
        for task_id, state in store.clear_finished_leases(conn):
            done.append(Repair("clear_lease", f"task {task_id}", f"cleared the lease of a {state} task"))
        for task_id in store.expire_leaseless_tasks(conn):
            done.append(
                Repair("expire_lease", f"task {task_id}", "gave the running task an expired lease; rescue requeues it")
            )
        for task_id in store.promote_overdue_scheduled(conn):
            done.append(Repair("promote_scheduled", f"task {task_id}", "promoted the overdue task to queued"))
        for task_id, pool in store.unpark_open_pool_tasks(conn):
            done.append(Repair("unpark_task", f"task {task_id}", f"unparked it: pool {pool} has room"))
        for pool, old, new in store.recount_pools(conn):
            done.append(Repair("recount_pool", f"pool {pool}", f"running {old} -> {new}"))
    for item in done:
        log.warning("repaired %s: %s", item.subject, item.detail)
    return done


def check(engine: sa.Engine, store: Store, *, repair: bool = False) -> CheckReport:
    """The report of one snapshot; with ``repair``, of a second one taken after the repairs."""
    first = read_snapshot(engine, store)
    if not repair:
        return first
    changes = apply_repairs(engine, store)
    after = read_snapshot(engine, store)
    return CheckReport(
        after.checked_at,
        after.violations,
        after.warnings,
        repaired=tuple(changes),
        found_before_repair=(*first.violations, *first.warnings),
    )
