"""Loads the named statements of every ``*.sql`` file in this package.

Each statement starts with ``-- name: verb_noun`` followed by comment lines
that say why it is written that way. A name that starts with ``_`` is a
fragment, not a statement: a statement includes it with a line
``-- compose: _fragment``, so a piece of SQL shared by several statements is
written once. Files are split by concern; a new concern adds a file, and a
name defined twice (in one file or across two) fails the import. Only
:mod:`taskqueue.db` executes the statements.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from importlib import resources
from importlib.abc import Traversable

_HEADER = re.compile(r"^-- name: (\w+)\s*$", re.MULTILINE)
_COMPOSE = re.compile(r"^-- compose: (\w+)\s*$", re.MULTILINE)


class SqlError(Exception):
    """The package's SQL files are inconsistent (a programming error, raised at import)."""


def _strip(body: str) -> str:
    sql = "\n".join(line for line in body.strip().splitlines() if not line.lstrip().startswith("--"))
    return sql.strip().rstrip(";").strip()


def parse(files: Iterable[tuple[str, str]]) -> dict[str, str]:
    """Statements by name from (filename, text) pairs; fragments composed in, then left out."""
    raw: dict[str, str] = {}
    origin: dict[str, str] = {}
    for filename, text in files:
        parts = _HEADER.split(text)
        for name, body in zip(parts[1::2], parts[2::2], strict=True):
            if name in raw:
                raise SqlError(f"{filename}: statement {name!r} is already defined in {origin[name]}")
            raw[name], origin[name] = body, filename

    def compose(match: re.Match[str]) -> str:
        fragment = match.group(1)
        if not fragment.startswith("_") or fragment not in raw:
            raise SqlError(f"compose: {fragment!r} is not a fragment (a name starting with '_') of these files")
        return _strip(raw[fragment])

    return {name: _strip(_COMPOSE.sub(compose, body)) for name, body in raw.items() if not name.startswith("_")}


def sql_files(root: Traversable | None = None) -> list[tuple[str, str]]:
    """(name, text) of every ``*.sql`` file under ``root`` (this package by default), sorted by name."""
    folder = root if root is not None else resources.files(__package__)
    found = [f for f in folder.iterdir() if f.name.endswith(".sql") and f.is_file()]
    return [(f.name, f.read_text(encoding="utf-8")) for f in sorted(found, key=lambda f: f.name)]


def load_statements(root: Traversable | None = None) -> dict[str, str]:
    return parse(sql_files(root))


#: Every named statement of the package, loaded once at import.
STATEMENTS = load_statements()
