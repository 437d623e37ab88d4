"""Shared machinery of the fault-injection suite.

- ``install_ledger``: tables in ``public`` of the test database, and an audit
  trigger on the queue's tasks that logs every state change (old and new
  state, attempts, worker, lease expiry, error) in commit order. The trigger is
  test scaffolding, not product code.
- ``Fleet``: real worker processes started through the CLI.
- ``assert_invariants``: what must hold after every scenario.
- ``FIGURES``: counts reported at the end of the run (kills, terminated
  connections, worst rescue delay, ...).
"""

from __future__ import annotations

import collections
import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg

from taskqueue import TaskQueue

REPO = Path(__file__).resolve().parents[2]
LEASE = 2.0
FINAL = ("done", "failed", "cancelled")

#: Figures of the whole run, printed in the terminal summary.
FIGURES: dict[str, float] = collections.defaultdict(float)


def bump(name: str, amount: float = 1) -> None:
    FIGURES[name] += amount


def worst(name: str, value: float | None) -> None:
    if value is not None and value > FIGURES.get(name, 0.0):
        FIGURES[name] = value


LEDGER_SQL = """
CREATE TABLE public.executions (
    seq bigserial PRIMARY KEY,
    run_id uuid NOT NULL UNIQUE,  -- one per handler call: a retried INSERT is not a second run
    task_id bigint NOT NULL,
    attempt integer NOT NULL,
    pid integer NOT NULL,
    at timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE TABLE public.effects (
    seq bigserial PRIMARY KEY,
    task_id bigint NOT NULL,
    pid integer NOT NULL
);
CREATE TABLE public.kills (
    pid integer NOT NULL,
    at timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE TABLE public.audit (
    seq bigserial PRIMARY KEY,
    task_id bigint NOT NULL,
    old_state text NOT NULL,
    new_state text NOT NULL,
    attempts integer NOT NULL,
    old_worker text,
    new_worker text,
    old_lease_expires_at timestamptz,
    error text,
    rescued boolean NOT NULL,
    at timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE FUNCTION public.audit_task() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.state IS DISTINCT FROM OLD.state THEN
        INSERT INTO public.audit (task_id, old_state, new_state, attempts, old_worker, new_worker,
                                  old_lease_expires_at, error, rescued)
        VALUES (NEW.id, OLD.state, NEW.state, NEW.attempts, OLD.worker, NEW.worker,
                OLD.lease_expires_at, NEW.error,
                OLD.state = 'running' AND NEW.error IS DISTINCT FROM OLD.error
                    AND NEW.error LIKE 'lease expired%');
    END IF;
    RETURN NULL;
END $$;
CREATE TRIGGER chaos_audit AFTER UPDATE ON taskqueue.tasks
    FOR EACH ROW EXECUTE FUNCTION public.audit_task();
"""


def install_ledger(dsn: str) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(LEDGER_SQL)


def query(dsn: str, sql: str, params: Iterable[Any] | None = None) -> list[tuple[Any, ...]]:
    with psycopg.connect(dsn, autocommit=True, application_name="chaos-admin") as conn:
        cur = conn.execute(sql, params)  # type: ignore[arg-type]
        return cur.fetchall() if cur.description is not None else []


def unfinished(dsn: str) -> int:
    return query(dsn, "SELECT count(*) FROM taskqueue.tasks WHERE state NOT IN ('done', 'failed', 'cancelled')")[0][0]


def wait_for(predicate: Callable[[], bool], timeout: float, what: str, step: float = 0.1) -> None:
    """Poll until ``predicate()``; the timeout is a generous upper bound, not a measurement."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(step)


def wait_all_final(dsn: str, timeout: float) -> None:
    wait_for(lambda: unfinished(dsn) == 0, timeout, "every task to finish")


def terminate_backends(dsn: str, application_names: Iterable[str]) -> int:
    """pg_terminate_backend every session of these application names in the test database."""
    rows = query(
        dsn,
        "SELECT count(*) FILTER (WHERE pg_terminate_backend(pid)) FROM pg_stat_activity"
        " WHERE datname = current_database() AND pid <> pg_backend_pid()"
        " AND application_name = ANY(%s)",
        (list(application_names),),
    )
    return int(rows[0][0])


# -- worker processes ------------------------------------------------------------
@dataclass
class Fleet:
    """Worker processes started through the CLI; replacements on demand."""

    dsn: str
    logdir: Path
    lease: float = LEASE
    extra_env: dict[str, str] = field(default_factory=dict)
    procs: list[subprocess.Popen[bytes]] = field(default_factory=list)
    kills: dict[int, float] = field(default_factory=dict)  # pid -> monotonic time of SIGKILL
    started: int = 0
    number: dict[int, int] = field(default_factory=dict)  # pid -> log file number
    ready_pids: set[int] = field(default_factory=set)

    def start(self, n: int = 1, *args: str) -> list[subprocess.Popen[bytes]]:
        """Start ``n`` workers through the CLI; ``args`` are extra CLI flags (e.g. --queues)."""
        out = []
        for _ in range(n):
            self.started += 1
            log = open(self.logdir / f"worker-{self.started}.log", "wb")
            env = {**os.environ, "TASKQUEUE_DSN": self.dsn, **self.extra_env}
            env.pop("TASKQUEUE_SCHEMA", None)
            proc = subprocess.Popen(
                [sys.executable, "-m", "taskqueue", "worker", "tests.chaos.app:worker", "--lease", str(self.lease),
                 "--no-migrate", *args],
                cwd=REPO,
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
            log.close()
            self.number[proc.pid] = self.started
            self.procs.append(proc)
            out.append(proc)
        return out

    def alive(self) -> list[subprocess.Popen[bytes]]:
        return [p for p in self.procs if p.poll() is None]

    def kill(self, proc: subprocess.Popen[bytes]) -> None:
        self.kills[proc.pid] = time.monotonic()
        proc.kill()
        proc.wait()
        query(self.dsn, "INSERT INTO public.kills (pid) VALUES (%s)", (proc.pid,))
        bump("kill -9 of a worker")

    def ready(self) -> list[subprocess.Popen[bytes]]:
        """Live workers whose main loop has started (they logged 'starting')."""
        out = []
        for proc in self.alive():
            if proc.pid not in self.ready_pids:
                try:
                    if b" starting: " in (self.logdir / f"worker-{self.number[proc.pid]}.log").read_bytes():
                        self.ready_pids.add(proc.pid)
                except OSError:
                    pass
            if proc.pid in self.ready_pids:
                out.append(proc)
        return out

    def kill_random(self, rng: random.Random, survivors: int = 0) -> int | None:
        """SIGKILL a random ready worker, if ``survivors`` other ready ones stay alive."""
        alive = self.ready()
        if len(alive) <= survivors:
            return None
        proc = rng.choice(alive)
        self.kill(proc)
        return proc.pid

    def keep(self, n: int) -> None:
        """Start replacements until ``n`` workers are alive."""
        missing = n - len(self.alive())
        if missing > 0:
            self.start(missing)

    def stop(self, timeout: float = 15.0, *, graceful: bool = False) -> None:
        """End every worker: SIGKILL by default (scenarios check the invariants before)."""
        for proc in self.alive():
            proc.send_signal(signal.SIGCONT)
            proc.send_signal(signal.SIGTERM if graceful else signal.SIGKILL)
        deadline = time.monotonic() + timeout
        for proc in self.procs:
            try:
                proc.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()

    def log_of(self, proc: subprocess.Popen[bytes]) -> str:
        return (self.logdir / f"worker-{self.number[proc.pid]}.log").read_text(errors="replace")

    def logs(self) -> str:
        return "\n".join(p.read_text(errors="replace") for p in sorted(self.logdir.glob("worker-*.log")))


def crash_waits(dsn: str) -> list[tuple[float, float | None]]:
    """For each task a killed worker held: (seconds from the kill to its rescue,
    seconds from the kill to its next claim, None if it was not claimed again)."""
    rows = query(
        dsn,
        "SELECT EXTRACT(EPOCH FROM r.at - k.at),"
        "       EXTRACT(EPOCH FROM (SELECT min(n.at) FROM public.audit n"
        "                            WHERE n.task_id = r.task_id AND n.seq > r.seq AND n.new_state = 'running')"
        "                   - k.at)"
        "  FROM public.audit r JOIN public.kills k ON r.old_worker LIKE '%%:' || k.pid"
        " WHERE r.rescued AND r.at > k.at",
    )
    return [(float(a), None if b is None else float(b)) for a, b in rows]


# -- invariants ---------------------------------------------------------------------
@dataclass
class Outcome:
    tasks: int
    claims: int
    executions: int
    reexecutions: int
    rescues: int
    retries: int
    worst_rescue_lag: float | None


def assert_invariants(tq: TaskQueue, dsn: str, *, expected_tasks: int | None = None) -> Outcome:
    """Everything the suite promises, checked after each scenario."""
    # The product's own checker, in one snapshot.
    report = tq.check()
    assert report.ok, report.to_dict()

    # Nothing lost: every task ended done, failed or cancelled.
    states = dict(query(dsn, "SELECT state, count(*) FROM taskqueue.tasks GROUP BY state"))
    assert set(states) <= set(FINAL), f"unfinished tasks: {states}"
    total = sum(states.values())
    if expected_tasks is not None:
        assert total == expected_tasks, f"{total} tasks, expected {expected_tasks}"

    # No counter drift: every pool is back to zero with nothing running.
    drift = query(dsn, "SELECT name, running FROM taskqueue.pools WHERE running <> 0")
    assert drift == [], f"pool counts drifted: {drift}"

    # Nothing completed twice: one transition into a final state per task.
    twice = query(
        dsn,
        "SELECT task_id, array_agg(new_state ORDER BY seq) FROM public.audit"
        " WHERE new_state IN ('done', 'failed', 'cancelled') GROUP BY task_id HAVING count(*) > 1",
    )
    assert twice == [], f"tasks finished more than once: {twice[:10]}"
    never = query(
        dsn,
        "SELECT t.id, t.state FROM taskqueue.tasks t WHERE t.attempts > 0 AND NOT EXISTS"
        " (SELECT 1 FROM public.audit a WHERE a.task_id = t.id AND a.new_state = t.state)",
    )
    assert never == [], f"tasks whose final state was never recorded by a transition: {never[:10]}"

    # Every claim after the first is explained by a rescue, a retry or a release:
    # claims of a task = 1 + its transitions from running back to waiting.
    unexplained = query(
        dsn,
        "SELECT task_id, claims, backs FROM ("
        "  SELECT task_id,"
        "         count(*) FILTER (WHERE new_state = 'running') AS claims,"
        "         count(*) FILTER (WHERE old_state = 'running' AND new_state IN ('queued', 'scheduled')) AS backs"
        "    FROM public.audit GROUP BY task_id) c"
        " WHERE claims > 0 AND claims <> backs + 1",
    )
    assert unexplained == [], f"claims not explained by a rescue or retry: {unexplained[:10]}"

    # Every execution ran under its own claim: attempt numbers strictly increase
    # per task in execution order, and each matches a recorded claim.
    repeated = query(
        dsn,
        "SELECT task_id, attempt, prev FROM ("
        "  SELECT task_id, attempt, lag(attempt) OVER (PARTITION BY task_id ORDER BY seq) AS prev"
        "    FROM public.executions) e WHERE prev IS NOT NULL AND attempt <= prev",
    )
    assert repeated == [], f"executions not under a fresh claim: {repeated[:10]}"
    unclaimed = query(
        dsn,
        "SELECT e.task_id, e.attempt FROM public.executions e WHERE NOT EXISTS"
        " (SELECT 1 FROM public.audit a WHERE a.task_id = e.task_id AND a.new_state = 'running'"
        "  AND a.attempts = e.attempt)",
    )
    assert unclaimed == [], f"executions without a matching claim: {unclaimed[:10]}"

    (claims, rescues, retries, lag) = query(
        dsn,
        "SELECT count(*) FILTER (WHERE new_state = 'running'),"
        "       count(*) FILTER (WHERE rescued),"
        "       count(*) FILTER (WHERE old_state = 'running' AND new_state IN ('queued', 'scheduled')"
        "                        AND NOT rescued),"
        "       EXTRACT(EPOCH FROM max(at - old_lease_expires_at) FILTER (WHERE rescued))"
        "  FROM public.audit",
    )[0]
    executions, reexec = query(
        dsn,
        "SELECT count(*), count(*) - count(DISTINCT task_id) FROM public.executions",
    )[0]
    outcome = Outcome(total, claims, executions, reexec, rescues, retries, None if lag is None else float(lag))
    bump("tasks run", total)
    bump("claims", claims)
    bump("handler executions", executions)
    bump("re-executions (all explained)", reexec)
    bump("rescues of expired leases", rescues)
    bump("retries and releases", retries)
    worst("worst rescue lag after lease expiry (s)", outcome.worst_rescue_lag)
    bump("scenarios with 0 lost / 0 completed twice / 0 counter drift")
    return outcome
