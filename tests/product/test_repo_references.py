"""The repository stands on its own: its docs, docstrings and comments name
only files a clone has (no design notes or reference documents kept beside
it), and every relative Markdown link reaches a file inside it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.support.paths import ROOT as REPO

SKIPPED_DIRS = {".git", ".venv", "node_modules", "__pycache__", "build", "dist"}

OUTSIDE = re.compile(r"ARCHITECTURE\.md|STYLE\.md|(?<![\w.-])shared/|(?<![\w.-])reference/")
"""Names of documents that live beside a checkout, not in it."""

MD_NAME = re.compile(r"(?<![\w/.-])([\w./-]*[\w-]\.md)\b")
MD_LINK = re.compile(r"\]\(([^)\s]+)\)")
DATA_NAMES = {"NOTES.md", "notes.md", "CHANGELOG.md"}
"""``.md`` names the docs and tests use for files an agent writes, not for documents."""
ME = Path(__file__).resolve()


def _sources() -> list[Path]:
    found = []
    for path in REPO.rglob("*"):
        parts = path.relative_to(REPO).parts
        if any(p in SKIPPED_DIRS or p.endswith(".egg-info") for p in parts):
            continue
        if path.suffix in (".py", ".md") and path.is_file():
            found.append(path)
    return sorted(found)


SOURCES = _sources()
MD_FILES = {p.name for p in SOURCES if p.suffix == ".md"}


def _lines(path: Path) -> list[tuple[int, str]]:
    return list(enumerate(path.read_text(encoding="utf-8").splitlines(), start=1))


def _where(path: Path, number: int, line: str) -> str:
    return f"{path.relative_to(REPO)}:{number}: {line.strip()}"


def test_the_scan_sees_the_docs_and_the_code() -> None:
    names = {str(p.relative_to(REPO)) for p in SOURCES}
    assert {"README.md", "docs/architecture.md", "oma/core/schema/errors.py"} <= names
    assert {"oma/workflows/team_run.py", "tests/product/test_repo_references.py"} <= names


@pytest.mark.parametrize("example", ["see ../shared/ARCHITECTURE.md", "shared/reference/x.md"])
def test_a_reference_outside_the_repository_is_caught(example: str) -> None:
    assert OUTSIDE.search(example)


def test_no_file_names_a_document_outside_the_repository() -> None:
    found = [
        _where(path, number, line)
        for path in SOURCES
        if path != ME
        for number, line in _lines(path)
        if OUTSIDE.search(line)
    ]
    assert found == []


def _exists(path: Path, name: str) -> bool:
    if name in DATA_NAMES:
        return True
    candidates = [path.parent / name, REPO / name, REPO / "docs" / name]
    if any(c.resolve().is_relative_to(REPO) and c.is_file() for c in candidates):
        return True
    return "/" not in name and name in MD_FILES


def test_every_markdown_file_named_is_in_the_repository() -> None:
    missing = [
        _where(path, number, line)
        for path in SOURCES
        if path != ME
        for number, line in _lines(path)
        for name in MD_NAME.findall(line)
        if not _exists(path, name)
    ]
    assert missing == []


def test_every_relative_link_of_the_docs_reaches_a_file_in_the_repository() -> None:
    broken = []
    for path in (p for p in SOURCES if p.suffix == ".md"):
        for number, line in _lines(path):
            for target in MD_LINK.findall(line):
                if re.match(r"[a-z]+:|#", target):
                    continue
                file = (path.parent / target.split("#")[0]).resolve()
                if not (file.is_relative_to(REPO) and file.exists()):
                    broken.append(_where(path, number, line))
    assert broken == []
