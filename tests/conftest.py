"""Suite-wide isolation (no test reads or writes the real user's XDG folders or socket), and
the suite-wide check that every event a daemon publishes decodes with the clients' strict
Structs (PROTOCOL §6; `robotad.daemon.events.CHECK_EVENTS_ENV`). Under ``ROBOTA_NO_SKIPS=1``
(CI) a skipped test fails (`tests.no_skips`)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest_plugins = ["tests.no_skips"]


@pytest.fixture(autouse=True)
def _isolated_xdg(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> Path:
    """Point every XDG folder and robota override at a fresh private temp tree."""
    home = tmp_path_factory.mktemp("home")
    for name, sub in (
        ("XDG_CONFIG_HOME", "config"),
        ("XDG_STATE_HOME", "state"),
        ("XDG_DATA_HOME", "data"),
        ("XDG_CACHE_HOME", "cache"),
        ("XDG_RUNTIME_DIR", "run"),
    ):
        path = home / sub
        path.mkdir(mode=0o700)
        monkeypatch.setenv(name, str(path))
    for name in (
        "ROBOTA_SOCKET",
        "ROBOTA_STATE_DIR",
        "ROBOTA_CONFIG",
        "NOTIFY_SOCKET",
        "LISTEN_PID",
        "LISTEN_FDS",
        "WATCHDOG_USEC",
        "OPENAI_API_KEY",
        "ANTHROPIC_API_KEY",
    ):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("ROBOTA_CHECK_EVENTS", "1")
    return home


@pytest.fixture(autouse=True)
def _published_events_decode() -> Iterator[None]:
    """Fail a test in whose process a daemon published an event a strict client cannot
    decode (daemons in subprocesses are checked by `tests.robotad_process.stop_robotad`)."""
    from robotad.daemon import events

    events.shape_violations.clear()
    yield
    assert events.shape_violations == [], "published events a client cannot decode"


@pytest.fixture
def fsyncs(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every fsync'd path, in order, recorded while the fsync happens."""
    calls: list[str] = []
    real = os.fsync

    def spy(fd: int) -> None:
        calls.append(os.readlink(f"/proc/self/fd/{fd}"))
        real(fd)

    monkeypatch.setattr(os, "fsync", spy)
    return calls
