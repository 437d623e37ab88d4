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
  dropped in turn, then with the two lease rules written as one ``CASE``;
- ``claim_writes``: the two writes of a task, the shapes scenario's by-id
  claim and its completion (no search), each a statement of its own from the
  client, on a lean copy of the rows (their key and the naive index: the
  issue's reference table) and on ``tasks``; then on ``tasks`` changed step
  by step, each step kept for the next: the claim indexes' predicates on one
  stored boolean column, the five CHECK constraints dropped, the three fit
  indexes on expressions dropped. What the queue's table costs every write
  of a task, and what each part of it would give back. Before those steps,
  on a schema of its own, a prototype of the layout that
  docs/performance.md names as what would close the dense shapes' gap: the
  nine claim indexes moved, without their predicate, to a narrow table of
  the claimable rows' ids and claim keys; a claim deletes its row there and
  updates the task in one statement, and the completion updates the task,
  which keeps seven indexes. Counted with the task's CHECK constraints
  (``narrow_claimable``), then without them (``narrow_claimable_no_checks``).
  Not the shipped schema: a measure of what it would give.

``python -m bench write_costs [--only pool_update,task_update,claim_writes]``
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import psycopg

from . import common
from .instructions import Cluster
from .shape_catalog import BY_ID_CLAIM

CASES = ("pool_update", "task_update", "claim_writes")
CLAIM_ROWS = 2_000
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


#: The indexes whose predicate says ``state = 'queued' AND NOT parked``, with their columns.
CLAIMABLE_INDEXES = (
    ("ix_tasks_claim", "(queue, priority, id)", ""),
    ("ix_tasks_claim_any", "(priority, id)", " AND id > 0"),
    ("ix_tasks_claim_desc", "(priority DESC, id)", " AND id > 0"),
    ("ix_tasks_fit", "(queue, bucket, priority, id)", ""),
    ("ix_tasks_fit_any_exact", "(required, priority, id)", " AND id > 0"),
    ("ix_tasks_fit_class", "(queue, required_class(required), priority, id)", ""),
    ("ix_tasks_fit_exact", "(queue, required, priority, id)", ""),
    ("ix_tasks_fit_fine", "(queue, required_fine(required), priority, id) INCLUDE (required, pool)",
     " AND lease_token IS NULL"),
    ("ix_tasks_fit_mid", "(queue, required_mid(required), priority, id)", ""),
)
CLAIM_STEPS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("claimable_column", (
        "ALTER TABLE tasks ADD COLUMN claimable boolean GENERATED ALWAYS AS (state = 'queued' AND NOT parked) STORED",
        *(f"DROP INDEX {name}" for name, _, _ in CLAIMABLE_INDEXES),
        *(f"CREATE INDEX {name} ON tasks {columns} WHERE claimable{more}" for name, columns, more in CLAIMABLE_INDEXES),
    )),
    ("and_no_checks", tuple(f"ALTER TABLE tasks DROP CONSTRAINT {name}" for name in CHECKS)),
    ("and_no_expression_fit_indexes", ("DROP INDEX ix_tasks_fit_class, ix_tasks_fit_mid, ix_tasks_fit_fine",)),
)


#: The narrow layout's table of claimable rows: each claim index's key columns, and no predicate (every row
#: in it is claimable). The expression levels are stored, as the table's own columns.
NARROW_LEVELS = {"required_class(required)": "class", "required_mid(required)": "mid",
                 "required_fine(required)": "fine"}


def _on_narrow(columns: str) -> str:
    """A claim index's columns (CLAIMABLE_INDEXES) on the narrow table, its levels read from stored columns."""
    for expression, column in NARROW_LEVELS.items():
        columns = columns.replace(expression, column)
    return columns


NARROW = (
    "CREATE TABLE claimable (id bigint PRIMARY KEY, queue text NOT NULL, priority integer NOT NULL, "
    "required integer NOT NULL, bucket smallint NOT NULL, class smallint NOT NULL, mid smallint NOT NULL, "
    "fine integer NOT NULL, pool text)",
    *(f"CREATE INDEX ON claimable {_on_narrow(columns)}" for _, columns, _ in CLAIMABLE_INDEXES),
)
NARROW_FILL = f"""
INSERT INTO claimable SELECT id, queue, priority, required, bucket, {", ".join(NARROW_LEVELS)}, pool
  FROM tasks t WHERE state = 'queued' AND NOT parked AND NOT EXISTS (SELECT 1 FROM claimable c WHERE c.id = t.id)
"""
#: The by-id claim (shape_catalog.BY_ID_CLAIM) that first takes the task's row out of the narrow table.
NARROW_CLAIM = "WITH gone AS (DELETE FROM claimable WHERE id = %s RETURNING id)" + BY_ID_CLAIM.replace(
    "WHERE id = %s AND", "FROM gone WHERE tasks.id = gone.id AND")


def per_task(cluster: Cluster, schema: str, table: str, narrow: bool = False) -> float:
    """Instructions a by-id claim + completion costs on ``table``: two sessions, their difference over LOOPS.

    ``narrow``: the claim takes the task's row out of ``claimable`` too (NARROW_CLAIM), which is refilled
    from ``tasks`` between sessions.
    """
    from . import shapes
    from .shape_catalog import NAIVE_DONE, on_table

    claim, done = (NARROW_CLAIM if narrow else on_table(BY_ID_CLAIM, table)), on_table(NAIVE_DONE, table)
    totals = []
    for n in (WARMUP, WARMUP + LOOPS):
        shapes.reset(cluster.dsn, schema, checkpoint=False, table=table)
        if narrow:
            common.execute(cluster.dsn, schema, NARROW_FILL, "VACUUM ANALYZE claimable")
        with psycopg.connect(cluster.dsn, autocommit=True, options=f"-c search_path={schema}") as conn:
            pid = conn.info.backend_pid
            for (task_id,) in conn.execute(f"SELECT id FROM {table} ORDER BY id LIMIT %s", (n,)).fetchall():
                conn.execute(claim, (task_id,), prepare=True)
                conn.execute(done, (task_id,), prepare=True)
        totals.append(cluster.total(pid))
    return (totals[1] - totals[0]) / LOOPS


def claim_writes(cluster: Cluster) -> dict[str, float]:
    from . import shapes
    from .shape_catalog import LEAN_TABLE, SHAPES

    schema = "bench_writes"
    shape = next(s for s in SHAPES if s.name == "one_size")
    shapes.seed(cluster.dsn, schema, shape, CLAIM_ROWS)
    shapes.make_lean_copy(cluster.dsn, schema, shape)
    out = {"lean_copy": per_task(cluster, schema, LEAN_TABLE), "tasks": per_task(cluster, schema, "tasks")}
    narrow = "bench_writes_narrow"
    shapes.seed(cluster.dsn, narrow, shape, CLAIM_ROWS)
    common.execute(cluster.dsn, narrow, *(f"DROP INDEX {name}" for name, _, _ in CLAIMABLE_INDEXES), *NARROW,
                   NARROW_FILL, "VACUUM ANALYZE claimable")
    out["narrow_claimable"] = per_task(cluster, narrow, "tasks", narrow=True)
    common.execute(cluster.dsn, narrow, *(f"ALTER TABLE tasks DROP CONSTRAINT {name}" for name in CHECKS))
    out["narrow_claimable_no_checks"] = per_task(cluster, narrow, "tasks", narrow=True)
    common.drop_schema(cluster.dsn, narrow)
    for label, statements in CLAIM_STEPS:
        common.execute(cluster.dsn, schema, *statements)
        out[label] = per_task(cluster, schema, "tasks")
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
                result = {"pool_update": pool_update, "task_update": task_update,
                          "claim_writes": claim_writes}[case](cluster)
                out[case] = {k: round(v) for k, v in result.items()}
                common.console.log(f"write_costs: {case}: "
                                   + ", ".join(f"{k} {v / 1e3:,.0f}k" for k, v in result.items()))
                out.setdefault("server", common.server_facts(cluster.dsn))
            finally:
                cluster.stop()
    return out
