"""The named-statement loader: every file of the package, fragments composed once, no name twice."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from taskqueue.sql import STATEMENTS, SqlError, load_statements, sql_files

PACKAGE = Path(__file__).resolve().parent.parent / "taskqueue" / "sql"


def write(folder: Path, name: str, text: str) -> None:
    (folder / name).write_text(text, encoding="utf-8")


def test_every_sql_file_of_the_package_is_loaded() -> None:
    on_disk = sorted(p.name for p in PACKAGE.glob("*.sql"))
    assert [name for name, _ in sql_files()] == on_disk
    for path in PACKAGE.glob("*.sql"):
        for name in re.findall(r"^-- name: (\w+)", path.read_text(), re.MULTILINE):
            assert name.startswith("_") or name in STATEMENTS, (path.name, name)


def test_a_new_file_adds_its_statements(tmp_path: Path) -> None:
    write(tmp_path, "a.sql", "-- name: one\n-- why\nSELECT 1;\n")
    write(tmp_path, "b.sql", "-- name: two\nSELECT 2;\n")
    assert load_statements(tmp_path) == {"one": "SELECT 1", "two": "SELECT 2"}


def test_a_name_defined_twice_in_two_files_is_refused(tmp_path: Path) -> None:
    write(tmp_path, "a.sql", "-- name: same\nSELECT 1;\n")
    write(tmp_path, "b.sql", "-- name: same\nSELECT 2;\n")
    with pytest.raises(SqlError, match=r"b\.sql: statement 'same' is already defined in a\.sql"):
        load_statements(tmp_path)


def test_a_name_defined_twice_in_one_file_is_refused(tmp_path: Path) -> None:
    write(tmp_path, "a.sql", "-- name: same\nSELECT 1;\n\n-- name: same\nSELECT 2;\n")
    with pytest.raises(SqlError, match="already defined"):
        load_statements(tmp_path)


def test_fragments_are_composed_and_not_statements(tmp_path: Path) -> None:
    write(
        tmp_path,
        "a.sql",
        "-- name: both\nWITH x AS (SELECT 1 AS v)\n-- compose: _tail\n\n"
        "-- name: _tail\n-- the shared end\nSELECT v FROM x;\n",
    )
    assert load_statements(tmp_path) == {"both": "WITH x AS (SELECT 1 AS v)\nSELECT v FROM x"}


def test_composing_an_unknown_fragment_is_refused(tmp_path: Path) -> None:
    write(tmp_path, "a.sql", "-- name: broken\nSELECT 1\n-- compose: _missing\n")
    with pytest.raises(SqlError, match="_missing"):
        load_statements(tmp_path)


def test_the_pool_release_is_written_once() -> None:
    text = "".join(t for _, t in sql_files())
    assert len(re.findall(r"SET running = p\.running - 1", text)) == 1
    for name in ("complete_task", "complete_task_pooled", "fail_task", "requeue_task"):
        assert "SET running = p.running - 1" in STATEMENTS[name], name
        assert "freed_full_pool" in STATEMENTS[name], name
