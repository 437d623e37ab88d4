"""The invariant checker: what must hold in the queue tables at every commit.

The checks are SQL views (migration 0002), so operators can query them
without Python; this module reads all of them in one REPEATABLE READ snapshot
and, on request, repairs what can be repaired in one transaction.
"""

from __future__ import annotations

import datetime as dt
import logging
from dataclasses import dataclass, field
from typing import Any

from .dberrors import lock_transient
from .plan import Plan, Run, retrying
from .store.invariants import RepairRows, Snapshot, read_checks
from .store.invariants import repair as repair_op

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
    "parked_not_queued": "only a queued task is parked (else it goes back to the queue parked, out of the claim index)",
}

SEVERITIES = ("violation", "warning")
#: A repair that keeps yielding to concurrent transactions gives up after this many tries.
REPAIR_ATTEMPTS = 20


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


def report_of(snapshot: Snapshot) -> CheckReport:
    """Group a snapshot's rows by check and severity."""
    violations: list[Violation] = []
    warnings: list[Violation] = []
    for check, rows in snapshot.found.items():
        for severity, into in (("violation", violations), ("warning", warnings)):
            picked = tuple(r for r in rows if r["severity"] == severity)
            if picked:
                into.append(Violation(check, severity, picked))
    return CheckReport(snapshot.checked_at, tuple(violations), tuple(warnings))


def repairs_of(changed: RepairRows) -> list[Repair]:
    done = [Repair("clear_lease", f"task {i}", f"cleared the lease of a {s} task") for i, s in changed.cleared_leases]
    done += [
        Repair("expire_lease", f"task {i}", "gave the running task an expired lease; rescue requeues it")
        for i in changed.expired_leases
    ]
    done += [Repair("promote_scheduled", f"task {i}", "promoted the overdue task to queued") for i in changed.promoted]
    done += [Repair("unpark_task", f"task {i}", f"cleared its parked flag: it is {s}") for i, s in changed.unqueued]
    done += [Repair("unpark_task", f"task {i}", f"unparked it: pool {pool} has room") for i, pool in changed.unparked]
    done += [Repair("recount_pool", f"pool {pool}", f"running {old} -> {new}") for pool, old, new in changed.recounted]
    return done


def after_repair(first: CheckReport, changes: list[Repair], after: CheckReport) -> CheckReport:
    for item in changes:
        log.warning("repaired %s: %s", item.subject, item.detail)
    return CheckReport(
        after.checked_at,
        after.violations,
        after.warnings,
        repaired=tuple(changes),
        found_before_repair=(*first.violations, *first.warnings),
    )


def repair_delay(attempt: int) -> float:
    log.info("repair yielded to a concurrent transaction; running it again")
    return min(0.5, 0.02 * attempt)


def check_plan(*, repair: bool = False) -> Plan[CheckReport]:
    """The report of one REPEATABLE READ snapshot; with ``repair``, of a second one taken after the repairs.

    The repair runs in one READ COMMITTED transaction, safe while workers run.
    A claim that waited for a pool row and then found the pool full still
    holds that row (PostgreSQL keeps the lock of a row whose re-check failed),
    so a repair that waits for locks could close a deadlock with claims. It
    waits at most REPAIR_LOCK_TIMEOUT_MS for any lock instead, which is
    shorter than the deadlock detector's delay: the repair gives up, never the
    workload, and runs again.
    """
    first = report_of((yield Run(read_checks(list(CHECKS)), mode="snapshot")))
    if not repair:
        return first
    changed = yield from retrying(
        lambda: Run(repair_op()), retryable=lock_transient, attempts=REPAIR_ATTEMPTS, delay=repair_delay
    )
    after = report_of((yield Run(read_checks(list(CHECKS)), mode="snapshot")))
    return after_repair(first, repairs_of(changed), after)
