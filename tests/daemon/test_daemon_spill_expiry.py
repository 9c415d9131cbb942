"""Spilled tool results leave the runtime folder when they expire (G-201), in a daemon that
stores and reads nothing meanwhile: the store purged on a put or a get only, so a daemon left
idle kept a result past its 24 hours, until the next one or its stop."""

from __future__ import annotations

import functools
from pathlib import Path

import pytest
import trio

import robotad.daemon.app
from robotad.daemon.app import SessionApplication, session_application
from robotad.server.app import DaemonContext
from robotad.storage.spill import SpillStore
from tests.daemon_helpers import DaemonHome, home_in_this_process

TTL = 0.2  # seconds a result is kept in this test (24 hours in a daemon)


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> DaemonHome:
    """Private folders, and this process's environment pointing at them (config, runtime)."""
    return home_in_this_process(tmp_path / "home", monkeypatch)


def stored(home: DaemonHome) -> list[str]:
    folders = list((home.root / "run" / "robota").glob("tr-*"))
    return [path.name for folder in folders for path in folder.iterdir() if path.name != ".owner"]


async def test_an_expired_result_is_removed_though_nothing_is_stored_or_read(
    home: DaemonHome, monkeypatch: pytest.MonkeyPatch
) -> None:
    """G-201."""
    monkeypatch.setattr(robotad.daemon.app, "SpillStore", functools.partial(SpillStore, ttl=TTL))
    monkeypatch.setattr(robotad.daemon.app, "_SPILL_PURGE_INTERVAL", TTL / 4)
    context = DaemonContext(
        state_dir=home.state_dir, socket_path=str(home.socket_path), event_buffer=64, trace=False
    )
    with trio.fail_after(20):
        async with session_application(context, idle_unload_seconds=0) as app:
            assert isinstance(app, SessionApplication)
            spill = app.manager.assembler.spill
            assert spill is not None
            await spill.scoped("s").put("a result too long to show")
            assert len(stored(home)) == 1
            await trio.sleep(TTL * 3)
            assert stored(home) == []
