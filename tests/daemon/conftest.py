"""Fixtures of the daemon tests: an in-process `SessionManager` on a private state folder."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import trio

from robotad.config import Config
from robotad.daemon.assembly import SessionAssembler
from robotad.daemon.manager import SessionManager
from robotad.mcp.hub import McpHub
from tests.providers.fake_servers import FakeModelServer

#: Bound on the manager's shutdown when a test is done with it.
SHUTDOWN_TIMEOUT = 20.0


@contextlib.asynccontextmanager
async def running_manager(
    state: Path, nursery: trio.Nursery, *, mcp: McpHub | None = None
) -> AsyncIterator[SessionManager]:
    """A running manager on `state` (start-up sweep done), default configuration (with `mcp`,
    the daemon's MCP hub, when given), no idle unloading; shut down when the block ends."""
    assembler = SessionAssembler.from_config(Config(), state_dir=state, mcp=mcp)
    manager = SessionManager(
        state_dir=state, assembler=assembler, nursery=nursery, idle_unload_seconds=0
    )
    await nursery.start(manager.run)
    yield manager
    with trio.fail_after(SHUTDOWN_TIMEOUT):
        await manager.shutdown(0)


@pytest.fixture
async def manager(tmp_path: Path, nursery: trio.Nursery) -> AsyncIterator[SessionManager]:
    """A running manager on a private state folder (`running_manager`), shut down after the
    test."""
    async with running_manager(tmp_path / "state", nursery) as running:
        yield running


@pytest.fixture
async def server(nursery: trio.Nursery) -> FakeModelServer:
    """A fake model server with no replies queued yet (a test adds its own), running for the
    test."""
    fake = FakeModelServer([])
    await nursery.start(fake.run)
    return fake
