"""Server instructions per claim + done, counted by callgrind: ``python -m bench instructions --old claim_tasks.v12``.

Timings on a shared 2-core machine move by a fifth between runs of the same
code, which hides a change worth 5%. Instructions do not move: callgrind
counts the same total for the same binary, data and statements. So this
scenario starts a private PostgreSQL cluster under ``valgrind --tool=callgrind``
(the same server binaries as ``pg_config --bindir``), seeds each ``--only``
shape at ``--rows`` (default 20,000: everything runs about 50x slower), and
loads the ``--old`` function file beside the current one, renamed
``claim_tasks_old`` (or, for a function the claim calls, e.g. ``--old
fit_candidate.v4``, that one renamed, called by a copy of the newest
claim_tasks renamed ``claim_tasks_old``). For each function it runs two
sessions, one of 10 warm-up loops (``--count N``: N) and one of as many +
``LOOPS``; the difference between their totals, over ``LOOPS``, is the
instructions one claim (``claim_tasks(available, 1, ...)``)
and its completion (a plain UPDATE by id) cost the server, start-up and
planning excluded. The naive query of the shapes scenario is counted the same
way, with its own index, for reference. Claimed rows are put back between
sessions. With 8 consumers on 2 cores a claim is bound by CPU, so these
counts say what the shapes scenario's x8 column can only hint at. On the
first shape it also counts the current function with the table's CHECK
constraints dropped (and put back), which is what they cost a claim + done.
On every shape it also counts ``TaskQueue.claim`` + ``complete`` as the
shapes scenario's "ours" runs them (the full row returned, the completion
statement the API picks), and a claim + done with the schema stepped back one
revision (functions, tables and all) and then forward again, so a migration
that changes tables, not functions, is measured in the same run too.

Needs valgrind and the PostgreSQL server binaries (``initdb``, ``postgres``);
run as root, the cluster belongs to the ``postgres`` user (``runuser``).
"""

from __future__ import annotations

import os
import random
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import psycopg

from . import common, shape_catalog, shapes

LOOPS = 100
WARMUP = 10
DEFAULT_ROWS = 20_000
DEFAULT_SHAPES = "one_size,mb_half,deadlines,mb_half_pools"
PORT = 55499
CLAIM = "SELECT id FROM {fn}(%(a)s, 1, %(queues)s, 'callgrind', 60, %(desc)s, false)"
NAIVE = "naive"  # the naive query of the shapes scenario, for reference
API = "api"  # TaskQueue.claim + complete, as the shapes scenario's "ours" runs them
CHECKS = ("SELECT conname, pg_get_constraintdef(oid) FROM pg_constraint"
          " WHERE conrelid = 'tasks'::regclass AND contype = 'c'")
DONE = "UPDATE tasks SET state = 'done', finished_at = now(), lease_token = NULL, lease_expires_at = NULL WHERE id = %s"


def _bindir() -> Path:
    pg_config = shutil.which("pg_config")
    if pg_config is None:
        raise SystemExit("instructions: pg_config not found (the PostgreSQL server binaries are needed)")
    return Path(subprocess.run([pg_config, "--bindir"], capture_output=True, text=True, check=True).stdout.strip())


def _as_owner(argv: list[str]) -> list[str]:
    """initdb and postgres refuse to run as root: run them as the postgres user then."""
    return ["runuser", "-u", "postgres", "--", *argv] if os.geteuid() == 0 else argv


class Cluster:
    """A throwaway cluster whose every backend runs under callgrind, one output file per process."""

    def __init__(self, root: Path) -> None:
        if shutil.which("valgrind") is None:
            raise SystemExit("instructions: valgrind not found")
        self.root, self.bindir = root, _bindir()
        self.data = root / "data"
        if os.geteuid() == 0:
            shutil.chown(root, "postgres")
        subprocess.run(_as_owner([str(self.bindir / "initdb"), "-D", str(self.data), "-A", "trust", "-U", "postgres"]),
                       check=True, capture_output=True)
        self.proc = subprocess.Popen(_as_owner([
            "valgrind", "--tool=callgrind", "--trace-children=yes", f"--callgrind-out-file={root}/cg.%p",
            str(self.bindir / "postgres"), "-D", str(self.data), "-p", str(PORT), "-k", str(root),
            "-c", "listen_addresses=", "-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "autovacuum=off",
        ]), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.dsn = f"postgresql://postgres@/postgres?host={root}&port={PORT}"
        deadline = time.monotonic() + 180
        while True:
            try:
                psycopg.connect(self.dsn, connect_timeout=5).close()
                break
            except psycopg.OperationalError:
                if time.monotonic() > deadline or self.proc.poll() is not None:
                    raise SystemExit("instructions: the server under callgrind did not start") from None
                time.sleep(1)

    def stop(self) -> None:
        subprocess.run(_as_owner([str(self.bindir / "pg_ctl"), "-D", str(self.data), "-m", "fast", "stop"]),
                       capture_output=True)
        self.proc.wait(timeout=120)

    def total(self, pid: int) -> int:
        """The instructions a backend ran, from the file callgrind writes when it exits."""
        path = self.root / f"cg.{pid}"
        for _ in range(600):
            found = callgrind_total(path) if path.exists() else None
            if found is not None:
                return found
            time.sleep(0.2)
        raise SystemExit(f"instructions: no callgrind totals for backend {pid}")


def callgrind_total(path: Path) -> int | None:
    """The instructions a callgrind output file counts (its ``totals:`` line), None while it has none."""
    for line in path.read_text().splitlines():
        if line.startswith("totals:"):
            return int(line.split()[1])
    return None


def _session(cluster: Cluster, schema: str, fn: str, shape: shape_catalog.Shape, loops: int, warmup: int) -> int:
    shapes.reset(cluster.dsn, schema)
    with psycopg.connect(cluster.dsn, autocommit=True, options=f"-c search_path={schema}") as conn:
        pid = conn.info.backend_pid
        a = shapes.draw_available(shape, random.Random(1))
        if fn == NAIVE:
            claim, params = shape.naive_sql(), shape.naive_params(a)
        else:
            claim = CLAIM.format(fn=fn)
            params = {"a": a, "queues": shape.queue_list, "desc": shape.order == "max"}
        for _ in range(warmup + loops):
            row = conn.execute(claim, params, prepare=True).fetchone()
            if row is None:
                raise SystemExit(f"instructions: {shape.name}: the backlog ran out; seed more --rows")
            conn.execute(DONE, (row[0],), prepare=True)
    return cluster.total(pid)


def _api_session(cluster: Cluster, schema: str, shape: shape_catalog.Shape, loops: int, warmup: int) -> int:
    """Loops of ``TaskQueue.claim`` + ``complete`` on one pooled connection: the statements users' code sends."""
    from taskqueue import TaskQueue

    shapes.reset(cluster.dsn, schema)
    tq = TaskQueue(cluster.dsn, schema=schema, pool_size=1, max_overflow=0)
    try:
        with tq.engine.connect() as conn:
            pid = int(conn.exec_driver_sql("SELECT pg_backend_pid()").scalar_one())
        a = shapes.draw_available(shape, random.Random(1))
        for _ in range(warmup + loops):
            task = tq.claim(available=a, worker="callgrind", order=shape.order,  # type: ignore[arg-type]
                            queues=shape.queue_list)
            if task is None:
                raise SystemExit(f"instructions: {shape.name}: the backlog ran out; seed more --rows")
            tq.complete(task)
    finally:
        tq.close()
    return cluster.total(pid)


def per_claim(cluster: Cluster, schema: str, fn: str, shape: shape_catalog.Shape, warmup: int) -> float:
    """Instructions a claim + done after ``warmup`` of them (more of them: tasks too big piled at the head)."""
    if fn == NAIVE:  # its own index, there only while it runs (as in the shapes scenario)
        common.execute(cluster.dsn, schema, shape.naive_index, "ANALYZE tasks")
    def session(loops: int) -> int:
        if fn == API:
            return _api_session(cluster, schema, shape, loops, warmup)
        return _session(cluster, schema, fn, shape, loops, warmup)

    try:
        base = session(0)
        return (session(LOOPS) - base) / LOOPS
    finally:
        if fn == NAIVE:
            common.execute(cluster.dsn, schema, "DROP INDEX bench_naive")


def without_checks(cluster: Cluster, schema: str, shape: shape_catalog.Shape, warmup: int) -> float:
    """The current function with the tasks table's CHECK constraints dropped (then put back): what they cost.

    PostgreSQL 15 reads each CHECK expression from its stored text and
    prepares it again on every statement that writes the table, so their
    cost is per statement, not per row; a claim + done is two such statements.
    """
    checks = common.rows(cluster.dsn, schema, CHECKS)
    common.execute(cluster.dsn, schema, *(f'ALTER TABLE tasks DROP CONSTRAINT "{name}"' for name, _ in checks))
    try:
        return per_claim(cluster, schema, "claim_tasks", shape, warmup)
    finally:
        common.execute(cluster.dsn, schema,
                       *(f'ALTER TABLE tasks ADD CONSTRAINT "{name}" {text}' for name, text in checks))


def at_previous_revision(cluster: Cluster, schema: str, shape: shape_catalog.Shape,
                         warmup: int) -> tuple[str, float]:
    """A claim + done with the schema one revision back (then forward again): what the head migration saved."""
    from alembic.script import ScriptDirectory

    from taskqueue import TaskQueue
    from taskqueue.migrate import alembic_config, downgrade, upgrade

    script = ScriptDirectory.from_config(alembic_config(None, schema))
    current = script.get_current_head()
    head = script.get_revision(current) if current is not None else None
    previous = head.down_revision if head is not None else None
    if not isinstance(previous, str):
        raise SystemExit("instructions: the head revision has no single previous revision")
    with TaskQueue(cluster.dsn, schema=schema) as tq:
        downgrade(tq.engine, schema, previous)
        try:
            common.execute(cluster.dsn, schema, "VACUUM ANALYZE tasks")
            return previous, per_claim(cluster, schema, "claim_tasks", shape, warmup)
        finally:
            upgrade(tq.engine, schema)
            common.execute(cluster.dsn, schema, "VACUUM ANALYZE tasks")


def load_renamed(dsn: str, schema: str, name: str) -> None:
    """Load ``name`` as ``claim_tasks_old``; a function the claim calls (``fit_candidate.v4``) as ``NAME_old``,
    with the newest claim_tasks calling it loaded as ``claim_tasks_old``, so one function's change is counted alone."""
    from taskqueue.migrate import functions_dir

    text = (functions_dir() / f"{name}.sql").read_text()
    function = name.split(".")[0]
    if f"FUNCTION {function}(" not in text:
        raise SystemExit(f"instructions: {name}.sql defines no {function}")
    if function == "claim_tasks":
        common.execute(dsn, schema, text.replace("FUNCTION claim_tasks(", "FUNCTION claim_tasks_old(", 1))
        return
    claim = newest_claim_tasks().read_text()
    if f"{function}(" not in claim:
        raise SystemExit(f"instructions: claim_tasks does not call {function}")
    common.execute(dsn, schema, text.replace(f"FUNCTION {function}(", f"FUNCTION {function}_old(", 1))
    claim = claim.replace(f"{function}(", f"{function}_old(")
    claim = claim.replace("FUNCTION claim_tasks(", "FUNCTION claim_tasks_old(", 1)
    common.execute(dsn, schema, claim)


def newest_claim_tasks() -> Path:
    from taskqueue.migrate import functions_dir

    return max(functions_dir().glob("claim_tasks.v*.sql"), key=lambda p: int(p.name.split(".")[1][1:]))


def run(opts: common.Options) -> dict[str, Any]:
    if not opts.old:
        raise SystemExit("instructions: name the older function file with --old, e.g. --old claim_tasks.v12")
    rows = opts.rows or DEFAULT_ROWS
    names = (opts.only or DEFAULT_SHAPES).split(",")
    chosen = [s for s in shape_catalog.SHAPES if s.name in names]
    if len(chosen) != len(names):
        raise SystemExit(f"instructions: unknown shape in {names}")
    warmup = opts.count or WARMUP
    out: dict[str, Any] = {"scenario": "instructions", "rows": rows, "loops": LOOPS, "warmup": warmup,
                           "old": opts.old, "shapes": []}
    with tempfile.TemporaryDirectory(prefix="tq-callgrind-") as tmp:
        cluster = Cluster(Path(tmp))
        try:
            out["server"] = common.server_facts(cluster.dsn)
            for shape in chosen:
                schema = f"cg_{shape.name}"
                common.console.log(f"instructions: {shape.name}: seeding {rows:,} rows under callgrind")
                shapes.seed(cluster.dsn, schema, shape, rows)
                load_renamed(cluster.dsn, schema, opts.old)
                old = per_claim(cluster, schema, "claim_tasks_old", shape, warmup)
                new = per_claim(cluster, schema, "claim_tasks", shape, warmup)
                naive = per_claim(cluster, schema, NAIVE, shape, warmup)
                api = per_claim(cluster, schema, API, shape, warmup)
                previous, before = at_previous_revision(cluster, schema, shape, warmup)
                common.console.log(f"instructions: {shape.name}: {old / 1e3:,.0f}k -> {new / 1e3:,.0f}k a claim + done"
                                   f" (naive {naive / 1e3:,.0f}k; through the API {api / 1e3:,.0f}k;"
                                   f" at revision {previous} {before / 1e3:,.0f}k)")
                row = {"shape": shape.name, "old_per_claim": round(old), "new_per_claim": round(new),
                       "naive_per_claim": round(naive), "new_over_old": common.ratio(new, old),
                       "new_over_naive": common.ratio(new, naive), "api_per_claim": round(api),
                       "api_over_naive": common.ratio(api, naive), "previous_revision": previous,
                       "previous_revision_per_claim": round(before),
                       "new_over_previous_revision": common.ratio(new, before)}
                if shape is chosen[0]:
                    row["new_per_claim_without_checks"] = round(without_checks(cluster, schema, shape, warmup))
                out["shapes"].append(row)
        finally:
            cluster.stop()
    return out
