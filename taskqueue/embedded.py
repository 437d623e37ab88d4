"""The embedded PostgreSQL used when no DSN is given (the ``pgserver`` wheel).

Its data lives in a per-user directory (``$TASKQUEUE_HOME`` overrides it), so
tasks survive restarts, and a server that is already running is reused.
"""

from __future__ import annotations

import logging
import os
import warnings
from pathlib import Path

from .errors import TaskQueueError

log = logging.getLogger("taskqueue.embedded")


def home_dir() -> Path:
    override = os.environ.get("TASKQUEUE_HOME")
    if override:
        return Path(override).expanduser()
    xdg = os.environ.get("XDG_DATA_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".local" / "share"
    return base / "taskqueue"


def embedded_dsn(data_dir: Path | None = None) -> str:
    """Start (or reuse) the embedded server and return its libpq URI."""
    pgdata = (data_dir or home_dir() / "pgdata").expanduser().resolve()
    pgdata.parent.mkdir(parents=True, exist_ok=True)
    # platformdirs warns when XDG_RUNTIME_DIR is unset; pgserver only needs a lock path.
    os.environ.setdefault("XDG_RUNTIME_DIR", str(pgdata.parent / "run"))
    Path(os.environ["XDG_RUNTIME_DIR"]).mkdir(parents=True, exist_ok=True, mode=0o700)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            import pgserver
        except ImportError as exc:  # pragma: no cover - pgserver is a hard dependency
            raise TaskQueueError("no DSN given and the embedded PostgreSQL (pgserver) is not installed") from exc
        try:
            server = pgserver.get_server(pgdata, cleanup_mode=None)  # type: ignore[attr-defined]
        except Exception as exc:
            raise TaskQueueError(f"could not start the embedded PostgreSQL in {pgdata}: {exc}") from exc
    log.debug("embedded PostgreSQL at %s", pgdata)
    return server.get_uri()
