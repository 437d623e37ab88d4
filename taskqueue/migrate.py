"""Runs the Alembic revisions, from a checkout or from an installed wheel.

The revisions ship inside the package as ``taskqueue._migrations`` (mapped
from the top-level ``migrations/`` folder), so ``TaskQueue.migrate()`` needs
no checkout. A transaction-scoped advisory lock per schema serialises
concurrent callers; the second one finds the schema at head and does nothing.
"""

from __future__ import annotations

import hashlib
import importlib.util
from pathlib import Path
from typing import TYPE_CHECKING

import sqlalchemy as sa

from .db import drive, execute_script
from .errors import TaskQueueError
from .store.leader import advisory_xact_lock

if TYPE_CHECKING:  # alembic is imported only when migrating: it slows every CLI start
    from alembic.config import Config


def migration_lock_key(schema: str) -> int:
    digest = hashlib.blake2b(f"taskqueue.migrate:{schema}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)


def script_location() -> str:
    """The migrations beside this very package: a checkout's own, else the installed copy.

    A checkout comes first, so code run from one checkout never migrates with
    the revisions an editable install maps from another.
    """
    here = Path(__file__).resolve().parent.parent
    checkout = here / "migrations"
    if (checkout / "env.py").exists() and (here / "pyproject.toml").exists():
        return str(checkout)
    spec = importlib.util.find_spec("taskqueue._migrations")
    if spec is not None and spec.submodule_search_locations:
        return str(Path(next(iter(spec.submodule_search_locations))))
    raise TaskQueueError("taskqueue's migrations are missing from this installation")


def alembic_config(connection: sa.Connection | None, schema: str) -> Config:
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", script_location())
    cfg.attributes["connection"] = connection
    cfg.attributes["schema"] = schema
    return cfg


def lock_for_migration(connection: sa.Connection, schema: str) -> None:
    drive(connection, advisory_xact_lock(migration_lock_key(schema)))


def upgrade(engine: sa.Engine, schema: str, revision: str = "head") -> None:
    from alembic import command

    with engine.connect() as conn:
        lock_for_migration(conn, schema)
        command.upgrade(alembic_config(conn, schema), revision)
        conn.commit()


def downgrade(engine: sa.Engine, schema: str, revision: str) -> None:
    """Step the schema back to ``revision`` (tests and operators' rollbacks)."""
    from alembic import command

    with engine.connect() as conn:
        lock_for_migration(conn, schema)
        command.downgrade(alembic_config(conn, schema), revision)
        conn.commit()


def functions_dir() -> Path:
    return Path(script_location()) / "functions"


def load_sql_objects(connection: sa.Connection, *files: str) -> None:
    """Run versioned function/view files, e.g. ``claim_tasks.v2``, in order.

    Each file under ``migrations/functions/`` is frozen once released, so a
    migration upgrades by loading version N+1 and downgrades by loading N.
    Sent as-is through the driver: PL/pgSQL text (%ROWTYPE, :=) is no template.
    """
    folder = functions_dir()
    for name in files:
        execute_script(connection, (folder / f"{name}.sql").read_text())
