"""Fixtures shared by the storage tests: a state folder, an open journal, an open spy (the
fsync spy, `fsyncs`, is every test folder's: tests/conftest.py)."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from robotad.storage.journal import FileExecutionJournal

from .journal_samples import SESSION


@pytest.fixture
def state(tmp_path: Path) -> Path:
    return tmp_path / "state"


@pytest.fixture
async def journal(state: Path) -> AsyncIterator[FileExecutionJournal]:
    async with FileExecutionJournal(state, SESSION) as opened:
        yield opened


@pytest.fixture
def opened(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every path ``os.open`` is called with (relative names as given), in order."""
    names: list[str] = []
    real = os.open

    def spy(path: str, *args: object, **kwargs: object) -> int:
        names.append(os.fspath(path))
        return real(path, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "open", spy)
    return names
