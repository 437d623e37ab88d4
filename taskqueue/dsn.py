"""Where the database is: the ``dsn`` argument, then ``$TASKQUEUE_DSN``, then embedded."""

from __future__ import annotations

import os
from urllib.parse import quote

import psycopg.conninfo
import sqlalchemy as sa
from sqlalchemy.engine import make_url

from .errors import ValidationError

SA_DRIVER = "postgresql+psycopg"


def resolve_dsn(dsn: str | None) -> str:
    """Return a libpq URI or key=value string, starting the embedded server if needed."""
    if dsn is None:
        dsn = os.environ.get("TASKQUEUE_DSN") or None
    if dsn is None:
        from .embedded import embedded_dsn

        return embedded_dsn()
    if not isinstance(dsn, str) or not dsn.strip():
        raise ValidationError("dsn", "must be a non-empty libpq URI or SQLAlchemy URL")
    return dsn.strip()


def to_libpq(dsn: str) -> str:
    """Normalise a libpq URI, key=value string or SQLAlchemy URL to what psycopg accepts."""
    if "://" in dsn:
        scheme, rest = dsn.split("://", 1)
        if scheme.startswith("postgresql+") or scheme == "postgres":
            dsn = "postgresql://" + rest
        elif scheme != "postgresql":
            raise ValidationError("dsn", f"unsupported scheme {scheme!r}; use postgresql://")
    try:
        psycopg.conninfo.conninfo_to_dict(dsn)
    except psycopg.ProgrammingError as exc:
        raise ValidationError("dsn", f"not a valid connection string: {exc}") from None
    return dsn


def to_sqlalchemy_url(dsn: str) -> sa.URL:
    """Turn a libpq DSN into a SQLAlchemy URL for the psycopg 3 driver."""
    libpq = to_libpq(dsn)
    if libpq.startswith("postgresql://"):
        return make_url(SA_DRIVER + libpq[len("postgresql") :])
    params = psycopg.conninfo.conninfo_to_dict(libpq)
    query = "&".join(f"{quote(str(k))}={quote(str(v))}" for k, v in params.items())
    return make_url(f"{SA_DRIVER}:///?{query}")
