"""The repository explains itself: every guarantee id, protocol section and document that the
code, tests and docs cite resolves to a file in the repository (docs/architecture.md)."""

from __future__ import annotations

import re
import subprocess
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
GUARANTEES = ROOT / "docs" / "guarantees.md"
PROTOCOL = ROOT / "docs" / "PROTOCOL.md"

G_ID = re.compile(r"\bG-(\d{3})\b")
SECTION = re.compile(r"\bPROTOCOL(?:\.md)?,? ?§ ?(\d+(?:\.\d+)?)")
#: Documents are cited by upper-case name (PROTOCOL.md) or by their path under docs/
DOCUMENT = re.compile(r"(?<![\"'])\b([A-Z][A-Z0-9_]*\.md|docs/[a-z0-9_-]+\.md)\b")
CITING = (".py", ".md", ".el", ".toml", ".sh")
#: File names that are conventions a user's project follows, not documents of this repository.
CONVENTIONS = frozenset({"AGENTS.md"})


@cache
def cited_files() -> list[Path]:
    listed = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    return [ROOT / name for name in listed if name.endswith(CITING) and (ROOT / name).is_file()]


def citations(pattern: re.Pattern[str]) -> dict[str, list[str]]:
    """Each cited value → the first few `file:line` places that cite it."""
    found: dict[str, list[str]] = {}
    for path in cited_files():
        for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
            for match in pattern.finditer(line):
                found.setdefault(match.group(1), []).append(f"{path.relative_to(ROOT)}:{number}")
    return found


def listed_guarantees() -> set[str]:
    return set(re.findall(r"^- G-(\d{3}):", GUARANTEES.read_text(), flags=re.MULTILINE))


def protocol_sections() -> set[str]:
    return set(re.findall(r"^#{2,3} §(\d+(?:\.\d+)?) ", PROTOCOL.read_text(), flags=re.MULTILINE))


def test_every_cited_guarantee_is_listed() -> None:
    listed = listed_guarantees()
    missing = {f"G-{g}": places[:3] for g, places in citations(G_ID).items() if g not in listed}
    assert missing == {}


def test_the_guarantee_list_is_numbered_without_gaps() -> None:
    numbers = sorted(int(g) for g in listed_guarantees())
    assert numbers == list(range(1, len(numbers) + 1))


def test_every_cited_protocol_section_exists() -> None:
    sections = protocol_sections()
    missing = {s: places[:3] for s, places in citations(SECTION).items() if s not in sections}
    assert missing == {}


def test_every_cited_document_exists() -> None:
    names = {path.name for path in ROOT.rglob("*.md") if ".venv" not in path.parts}
    missing = {
        d: places[:3]
        for d, places in citations(DOCUMENT).items()
        if (d.startswith("docs/") and not (ROOT / d).is_file())
        or (not d.startswith("docs/") and d not in names | CONVENTIONS)
    }
    assert missing == {}


def test_the_checks_see_citations() -> None:
    """The patterns find what they look for (a broken regex would pass everything)."""
    assert "041" in citations(G_ID)
    assert "5" in citations(SECTION)
    assert "REFERENCE.md" in citations(DOCUMENT)
