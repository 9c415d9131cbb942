"""Fixtures shared by the Session's tests."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    """A session's cwd holding ``notes.txt`` (tools read it; nothing else is there)."""
    cwd = tmp_path / "project"
    cwd.mkdir()
    (cwd / "notes.txt").write_text("remember the milk\n")
    return cwd
