"""What one write to ``pools`` or ``tasks`` costs the server, in instructions under callgrind.

PostgreSQL 15 reads a trigger's WHEN condition and a table's CHECK
constraints from their stored text, and prepares them again, in every
statement that writes the table, whether a condition holds or a row changes
much. Every claim and completion of a pooled task updates its pool's row,
and every claim, heartbeat and completion updates a task's row, so these
fixed costs are paid per statement. This scenario counts them on a private
cluster under callgrind (see ``bench instructions``), 200 statements a
session after 10, each a statement of its own inside a PL/pgSQL loop:

- ``pool_update``: ``UPDATE pools SET running = running + 1`` (a claim's
  slot) on pools with room, with the trigger of the schema (``on_pool_room``,
  migration 0061), with the two it replaced (``mark_freed_on_free_slot`` and
  ``reopen_on_free_slot``, revision 0060), and with none;
- ``task_update``: ``UPDATE tasks SET lease_expires_at = ...`` (a heartbeat)
  on claimed tasks, with the table's five CHECK constraints, then with each
  dropped in turn, then with the two lease rules written as one ``CASE``.

``python -m bench write_costs [--only pool_update,task_update]``
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import psycopg

from . import common
from .instructions import Cluster

CASES = ("pool_update", "task_update")
LOOPS = 200
WARMUP = 10
POOL_LOOP = """
CREATE OR REPLACE FUNCTION taskqueue.bench_pool_writes(n integer) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    FOR i IN 1..n LOOP
        UPDATE taskqueue.pools SET running = running + 1
         WHERE name = 'p' || (i % 10) AND (running_limit IS NULL OR running < running_limit);
    END LOOP;
END $$
"""
TASK_LOOP = """
CREATE OR REPLACE FUNCTION taskqueue.bench_task_writes(n integer) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    FOR i IN 1..n LOOP
        UPDATE taskqueue.tasks SET lease_expires_at = now() + interval '1 minute' WHERE id = 1 + i % 10;
    END LOOP;
END $$
"""
CHECKS = ("ck_tasks_id_positive", "ck_tasks_required_nonnegative", "ck_tasks_attempts_in_range",
          "ck_tasks_idle_has_no_lease", "ck_tasks_running_has_lease")
LEASE_CASE = ("ALTER TABLE taskqueue.tasks ADD CONSTRAINT ck_tasks_lease CHECK (CASE WHEN state = 'running' THEN "
              "lease_token IS NOT NULL AND lease_expires_at IS NOT NULL AND worker IS NOT NULL "
              "ELSE lease_token IS NULL AND lease_expires_at IS NULL END)")


def per_statement(cluster: Cluster, function: str) -> float:
    """Instructions one statement of ``function``'s loop costs: two sessions, their difference over LOOPS."""
    totals = []
    for n in (WARMUP, WARMUP + LOOPS):
        with psycopg.connect(cluster.dsn, autocommit=True) as conn:
            pid = conn.info.backend_pid
            conn.execute(f"SELECT taskqueue.{function}(%s)", (n,))
        totals.append(cluster.total(pid))
    return (totals[1] - totals[0]) / LOOPS


def _old_pool_triggers(dsn: str) -> None:
    from taskqueue.migrate import functions_dir

    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("SET search_path = taskqueue")
        conn.execute("ALTER TABLE pools DISABLE TRIGGER on_pool_room")
        for name in ("mark_pool_freed.v1", "reopen_pool.v1", "pool_triggers.v2"):
            conn.execute((functions_dir() / f"{name}.sql").read_text())


def pool_update(cluster: Cluster) -> dict[str, float]:
    common.execute(cluster.dsn, "taskqueue", "INSERT INTO pools (name, running_limit) SELECT 'p' || g, "
                   "CASE WHEN g % 2 = 0 THEN 1000000 END FROM generate_series(0, 9) g", POOL_LOOP)
    out = {"on_pool_room": per_statement(cluster, "bench_pool_writes")}
    _old_pool_triggers(cluster.dsn)
    out["two_triggers_0060"] = per_statement(cluster, "bench_pool_writes")
    common.execute(cluster.dsn, "taskqueue", "ALTER TABLE pools DISABLE TRIGGER USER")
    out["no_trigger"] = per_statement(cluster, "bench_pool_writes")
    return out


def task_update(cluster: Cluster) -> dict[str, float]:
    from taskqueue import TaskQueue

    with TaskQueue(cluster.dsn) as tq:
        tq.enqueue_many([{"payload": i} for i in range(10)])
        for _ in range(10):
            tq.claim()
    common.execute(cluster.dsn, "taskqueue", TASK_LOOP)
    out = {"five_checks": per_statement(cluster, "bench_task_writes")}
    for name in CHECKS:
        common.execute(cluster.dsn, "taskqueue", f"ALTER TABLE tasks DROP CONSTRAINT {name}")
        out[f"without_{name}_and_those_before"] = per_statement(cluster, "bench_task_writes")
    common.execute(cluster.dsn, "taskqueue", LEASE_CASE)
    out["the_two_lease_rules_as_one_case"] = per_statement(cluster, "bench_task_writes")
    return out


def run(opts: common.Options) -> dict[str, Any]:
    cases = (opts.only or ",".join(CASES)).split(",")
    unknown = sorted(set(cases) - set(CASES))
    if unknown:
        raise SystemExit(f"write_costs: no case {', '.join(unknown)}")
    out: dict[str, Any] = {"scenario": "write_costs", "loops": LOOPS}
    for case in cases:
        with tempfile.TemporaryDirectory(prefix="tq-callgrind-") as tmp:
            cluster = Cluster(Path(tmp))
            try:
                from taskqueue import TaskQueue

                with TaskQueue(cluster.dsn) as tq:
                    tq.migrate()
                common.console.log(f"write_costs: {case} under callgrind")
                result = pool_update(cluster) if case == "pool_update" else task_update(cluster)
                out[case] = {k: round(v) for k, v in result.items()}
                common.console.log(f"write_costs: {case}: "
                                   + ", ".join(f"{k} {v / 1e3:,.0f}k" for k, v in result.items()))
                out.setdefault("server", common.server_facts(cluster.dsn))
            finally:
                cluster.stop()
    return out
