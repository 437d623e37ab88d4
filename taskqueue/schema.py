"""The PostgreSQL schema that holds a queue's objects.

The schema name is the one identifier that must appear in SQL text, so it is
checked against a strict pattern and always quoted by SQLAlchemy; everything
else reaches the database as bound data.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from .errors import ValidationError

if TYPE_CHECKING:  # imported where used: the CLI reads SCHEMA_DEFAULT without loading SQLAlchemy
    import sqlalchemy as sa

SCHEMA_DEFAULT = "taskqueue"
_SCHEMA_RE = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")


def check_schema_name(schema: object) -> str:
    if not isinstance(schema, str) or not _SCHEMA_RE.match(schema):
        raise ValidationError(
            "schema", f"{schema!r} must be lower-case letters, digits and _ (at most 63, not starting with a digit)"
        )
    if schema.startswith("pg_") or schema in ("public", "information_schema"):
        raise ValidationError("schema", f"{schema!r} is reserved; pick a dedicated schema")
    return schema


def notify_channel(schema: str) -> str:
    """The LISTEN/NOTIFY channel of a queue: one per schema."""
    return f"{schema}_wakeup"


def prepare_schema(connection: sa.Connection, schema: str) -> None:
    """Create the schema if needed and point this session's search_path at it."""
    import sqlalchemy as sa

    connection.execute(sa.schema.CreateSchema(schema, if_not_exists=True))
    set_search_path(connection, schema)


def schema_path(schema: str) -> str:
    """The queue schema as a search_path value (quoted: a schema name may need it)."""
    return f'"{schema}"'


def set_search_path(connection: sa.Connection, schema: str) -> None:
    import sqlalchemy as sa

    from .sql import STATEMENTS

    connection.execute(sa.text(STATEMENTS["set_search_path"]), {"path": schema_path(schema)})
