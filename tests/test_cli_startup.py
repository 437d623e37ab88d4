"""The ``taskqueue`` command starts fast: no command module may load the database stack at import.

Every command module is imported on each start (typer needs their
signatures for ``--help``), so SQLAlchemy, psycopg, alembic and the queue
must be imported inside the command functions. Timings are in
docs/performance.md; this test checks the cause, not the clock.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
HEAVY = ("sqlalchemy", "psycopg", "alembic", "pgserver", "psutil", "taskqueue.queue", "taskqueue.db")

PROBE = """
import json, sys
import taskqueue.cli.app
print(json.dumps(sorted(m for m in {heavy} if m in sys.modules)))
"""


def _loaded_after(code: str) -> list[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)}
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True,
                            timeout=60, check=True)
    return json.loads(result.stdout)


def test_importing_the_command_loads_no_database_module() -> None:
    assert _loaded_after(PROBE.format(heavy=HEAVY)) == []


def test_importing_taskqueue_loads_the_database_stack_only_on_first_use() -> None:
    code = "import json, sys, taskqueue\nprint(json.dumps(sorted(m for m in {heavy} if m in sys.modules)))"
    assert _loaded_after(code.format(heavy=HEAVY)) == []
    used = "import json, sys, taskqueue\ntaskqueue.TaskQueue\nprint(json.dumps('sqlalchemy' in sys.modules))"
    assert _loaded_after(used) is True
