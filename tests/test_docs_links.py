"""Every link between the project's markdown files lands: the file exists and so does the heading it names.

The docs cross-link heavily (a round's figures point at the round that
explains them), and rounds move from ``performance.md`` to its history as
new ones land. A moved heading silently breaks every link to it; this
catches that. Anchors follow GitHub's rule: the heading in lower case, with
punctuation and symbols dropped and spaces turned into hyphens, and ``-1``,
``-2``... after repeats.
"""

from __future__ import annotations

import functools
import re
import unicodedata
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FILES = sorted([*ROOT.glob("*.md"), *(ROOT / "docs").glob("*.md")])
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^\s*(```|~~~)")


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: letters, digits, marks, '_' and '-' kept; spaces become '-'."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link in a heading counts by its text
    kept = [c for c in text.lower() if c in " -_" or unicodedata.category(c)[0] in "LNM"]
    return "".join(kept).replace(" ", "-")


def outside_code(text: str) -> list[str]:
    """The file's lines, with fenced code blocks left out."""
    lines, fenced = [], False
    for line in text.splitlines():
        if FENCE.match(line):
            fenced = not fenced
            continue
        if not fenced:
            lines.append(line)
    return lines


@functools.cache
def anchors(path: Path) -> frozenset[str]:
    """The anchors GitHub gives the headings of one markdown file (read once: many links name the same file)."""
    seen: dict[str, int] = {}
    out = set()
    for line in outside_code(path.read_text()):
        m = HEADING.match(line)
        if not m:
            continue
        base = slug(m.group(2))
        n = seen.get(base, 0)
        seen[base] = n + 1
        out.add(base if n == 0 else f"{base}-{n}")
    return frozenset(out)


def links(path: Path) -> list[str]:
    """The relative link targets of one markdown file (web addresses and mail left out)."""
    out = []
    for line in outside_code(path.read_text()):
        line = re.sub(r"`[^`]*`", "", line)  # code spans are not links
        for target in LINK.findall(line):
            if not re.match(r"^[a-z]+:", target):
                out.append(target)
    return out


def test_the_slug_follows_githubs_rule() -> None:
    assert slug("This round: one queue's descending look (migration 0048)") == (
        "this-round-one-queues-descending-look-migration-0048")
    assert slug("claim_many's growth, 10k → 1M") == "claim_manys-growth-10k--1m"
    assert slug("The `asyncio` API (issue 13)") == "the-asyncio-api-issue-13"


def test_repeated_headings_get_numbered_anchors(tmp_path: Path) -> None:
    doc = tmp_path / "x.md"
    doc.write_text("# Drain\n\n```\n# not a heading\n```\n\n## Drain\n")
    assert anchors(doc) == {"drain", "drain-1"}


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_lands(path: Path) -> None:
    broken = []
    for target in links(path):
        file_part, _, anchor = target.partition("#")
        dest = (path.parent / file_part).resolve() if file_part else path
        if not dest.exists():
            broken.append(f"{target}: no such file")
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            broken.append(f"{target}: no such heading")
    assert not broken, f"{path.relative_to(ROOT)}: " + "; ".join(broken)
