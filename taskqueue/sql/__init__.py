"""Loads the named statements of ``queries.sql`` and ``registry.sql``.

Each statement starts with ``-- name: verb_noun`` followed by comment lines
that say why it is written that way. Only :mod:`taskqueue.store` executes them.
"""

from __future__ import annotations

import re
from importlib import resources

_HEADER = re.compile(r"^-- name: (\w+)\s*$", re.MULTILINE)


def load_queries(filename: str = "queries.sql") -> dict[str, str]:
    text = resources.files(__package__).joinpath(filename).read_text(encoding="utf-8")
    parts = _HEADER.split(text)
    queries: dict[str, str] = {}
    for name, body in zip(parts[1::2], parts[2::2]):
        if name in queries:
            raise RuntimeError(f"{filename}: query {name!r} is defined twice")
        sql = "\n".join(line for line in body.strip().splitlines() if not line.lstrip().startswith("--"))
        queries[name] = sql.strip().rstrip(";")
    return queries


FILES = ("queries.sql", "registry.sql")


def load_all() -> dict[str, str]:
    """Every file's statements in one map; a name defined in two files is an error."""
    queries: dict[str, str] = {}
    for filename in FILES:
        for name, sql in load_queries(filename).items():
            if name in queries:
                raise RuntimeError(f"{filename}: query {name!r} is defined in another file too")
            queries[name] = sql
    return queries
