"""Fixtures of the daemon tests: an in-process `SessionManager` on a private state folder."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import trio

from robotad.config import Config
from robotad.daemon.assembly import SessionAssembler
from robotad.daemon.manager import SessionManager

#: Bound on the manager's shutdown when a test is done with it.
SHUTDOWN_TIMEOUT = 20.0


@pytest.fixture
async def manager(tmp_path: Path, nursery: trio.Nursery) -> AsyncIterator[SessionManager]:
    """A running manager (start-up sweep done), default configuration, no idle unloading;
    shut down after the test."""
    state = tmp_path / "state"
    assembler = SessionAssembler.from_config(Config(), state_dir=state)
    manager = SessionManager(
        state_dir=state, assembler=assembler, nursery=nursery, idle_unload_seconds=0
    )
    await nursery.start(manager.run)
    yield manager
    with trio.fail_after(SHUTDOWN_TIMEOUT):
        await manager.shutdown(0)
