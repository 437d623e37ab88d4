"""The client's instructions per claim + complete, counted by callgrind: ``python -m bench client_instructions``.

With 8 consumers on two cores the client's CPU is about a third of what a
task costs (``bench cpu_split``), and timings on this machine move by a fifth
between runs. Instructions do not: this scenario runs each client loop in a
Python process of its own under ``valgrind --tool=callgrind``, once for
``FIRST`` loops and once for ``FIRST + LOOPS``, against the same server and
the same rows (``one_size``, put back between runs), and reports the
difference over ``LOOPS``: what one claim + complete costs the client, start-up
and imports excluded. The loops:

- ``api``: ``TaskQueue.claim`` + ``complete`` at the defaults, as users and
  ``bench shapes`` run them;
- ``api_fresh_cursors``: the same, with a new cursor for every statement, as
  before the cursors were reused (``taskqueue/cursors.py``);
- ``bare_reused``: the API's two statements through bare psycopg on one
  connection, prepared, the 22 columns of a ``Task``, on two reused cursors;
- ``bare_fresh``: the same with a new cursor for every statement;
- ``bare_id``: the claim fetching the id and the lease token only, and a
  plain completion, through ``conn.execute`` (the naive loop's way).

``python -m bench client_instructions [--dsn DSN]``; needs valgrind.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from . import common, shapes
from .instructions import callgrind_total
from .shape_catalog import SHAPES

SCHEMA = "bench_client_instructions"
SHAPE = "one_size"
ROWS = 5_000
FIRST, LOOPS = 50, 200
KINDS = ("api", "api_fresh_cursors", "bare_reused", "bare_fresh", "bare_id")
ID_CLAIM = "SELECT id, lease_token FROM claim_tasks(%s, 1, NULL, 'bare', 60, false, false)"
ID_DONE = ("UPDATE tasks SET state = 'done', finished_at = now(), lease_token = NULL, lease_expires_at = NULL"
           " WHERE id = %s AND lease_token = %s")


def _loop(kind: str, n: int, dsn: str, schema: str) -> None:
    """The child: ``n`` claims + completions of ``kind`` (run under callgrind by :func:`count`)."""
    import psycopg
    from psycopg.rows import dict_row, tuple_row

    from taskqueue import TaskQueue, db
    from taskqueue.cursors import Cursors

    available = 10
    if kind.startswith("api"):
        if kind == "api_fresh_cursors":
            db.reused = lambda d: Cursors(  # type: ignore[attr-defined,assignment]
                d.cursor(row_factory=tuple_row), d.cursor(row_factory=dict_row))
        with TaskQueue(dsn, schema=schema) as tq:
            for _ in range(n):
                task = tq.claim(available=available, worker="bench")
                assert task is not None, "the backlog ran out"
                tq.complete(task)
        return
    claim, done = db.PYFORMAT["claim_tasks"], db.PYFORMAT["complete_task_alone"]
    params = {"available": available, "limit": 1, "queues": None, "worker": "bench", "lease": 60.0,
              "descending": False, "peek": False}
    with psycopg.connect(dsn, autocommit=True, options=f"-c search_path={schema}") as conn:
        if kind == "bare_id":
            for _ in range(n):
                row = conn.execute(ID_CLAIM, (available,), prepare=True).fetchone()
                assert row is not None, "the backlog ran out"
                conn.execute(ID_DONE, row, prepare=True)
            return
        tuples, dicts = conn.cursor(row_factory=tuple_row), conn.cursor(row_factory=dict_row)
        for _ in range(n):
            if kind == "bare_fresh":
                tuples, dicts = conn.cursor(row_factory=tuple_row), conn.cursor(row_factory=dict_row)
            tuples.execute(claim, params, prepare=True)
            claimed = tuples.fetchall()[0]
            dicts.execute(done, {"id": claimed[0], "token": claimed[-1], "result": None}, prepare=True)
            dicts.fetchone()


def count(kind: str, n: int, dsn: str, schema: str, tmp: Path) -> int:
    """Instructions of one child process running ``n`` loops of ``kind`` under callgrind."""
    shapes.reset(dsn, schema, checkpoint=False)
    out = tmp / f"cg.{kind}.{n}"
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent)}
    subprocess.run(["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", sys.executable, "-m",
                    "bench.client_instructions", kind, str(n), dsn, schema],
                   check=True, capture_output=True, env=env)
    found = callgrind_total(out)
    if found is None:
        raise SystemExit(f"client_instructions: no callgrind totals for {kind}")
    return found


def run(opts: common.Options) -> dict[str, Any]:
    if shutil.which("valgrind") is None:
        raise SystemExit("client_instructions: valgrind not found")
    shape = next(s for s in SHAPES if s.name == SHAPE)
    shapes.seed(opts.dsn, SCHEMA, shape, opts.rows or ROWS)
    out: dict[str, Any] = {"scenario": "client_instructions", "shape": SHAPE, "first": FIRST, "loops": LOOPS,
                           "per_loop": {}}
    try:
        with tempfile.TemporaryDirectory(prefix="tq-client-cg-") as tmp:
            for kind in KINDS:
                base = count(kind, FIRST, opts.dsn, SCHEMA, Path(tmp))
                per = (count(kind, FIRST + LOOPS, opts.dsn, SCHEMA, Path(tmp)) - base) / LOOPS
                out["per_loop"][kind] = round(per)
                common.console.log(f"client_instructions: {kind}: {per / 1e3:,.0f}k a claim + complete")
    finally:
        common.drop_schema(opts.dsn, SCHEMA)
    return out


if __name__ == "__main__":
    _loop(sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4])
