"""The daemon's sessions share pooled SDK clients (the session application in process, its
OpenAI-compatible provider pointed at a loopback fake server): one kept-alive connection for
every session of a configuration, a new client when the key command prints another key, and
every pooled client closed when the daemon shuts down."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
import trio

from protocol.errors import InvalidParams
from protocol.methods import CreateParams, RunParams
from protocol.shapes import TurnCompleted
from robotad.daemon.app import SessionApplication, session_application
from robotad.daemon.operations import SessionOperations
from robotad.server.app import Application, DaemonContext
from tests.daemon_helpers import DaemonHome, home_in_this_process
from tests.providers.fake_servers import FakeModelServer, Reply, openai_stream

TIMEOUT = 20.0
USAGE = {"prompt_tokens": 12, "completion_tokens": 2, "total_tokens": 14}


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> DaemonHome:
    """Private folders, and this process's environment pointing at them (config, runtime)."""
    return home_in_this_process(tmp_path / "home", monkeypatch)


@pytest.fixture
async def server(nursery: trio.Nursery) -> FakeModelServer:
    fake = FakeModelServer([Reply(events=openai_stream(["pooled"], usage=USAGE))])
    await nursery.start(fake.run)
    return fake


@asynccontextmanager
async def serving(home: DaemonHome, server: FakeModelServer) -> AsyncIterator[Application]:
    """The session application of a daemon whose provider ``fake`` reads its key from the
    file ``key`` (so a test can change it) and talks to `server`."""
    key_file = home.root / "key"
    key_file.write_text("sk-first\n")
    home.write_config(
        f"""
[providers.fake]
kind = "openai"
base_url = "{server.base_url}/v1"
api_key_command = "cat {key_file}"
"""
    )
    context = DaemonContext(
        state_dir=home.state_dir, socket_path=str(home.socket_path), event_buffer=64, trace=False
    )
    async with session_application(context, idle_unload_seconds=0) as app:
        yield app


async def _turn(ops: SessionOperations, session_id: str) -> None:
    outcome = await ops.run(RunParams(session_id=session_id, prompt="hello"), None)
    assert isinstance(outcome, TurnCompleted)
    assert outcome.response == "pooled"


async def test_sessions_of_one_provider_share_one_connection_and_a_new_key_gets_a_new_one(
    home: DaemonHome, server: FakeModelServer, tmp_path: Path
) -> None:
    with trio.fail_after(TIMEOUT):
        async with serving(home, server) as app:
            assert isinstance(app, SessionApplication)
            manager = app.manager
            ops = SessionOperations(manager)
            create = CreateParams(cwd=str(tmp_path), provider="fake")
            first = (await manager.create(create)).session_id
            second = (await manager.create(create)).session_id
            await _turn(ops, first)
            await _turn(ops, second)
            assert server.accepted == 1  # both sessions' calls on one kept-alive connection
            await manager.close(first)
            await _turn(ops, second)  # the closed session's provider left the client open
            assert server.accepted == 1
            (home.root / "key").write_text("sk-second\n")
            third = (await manager.create(create)).session_id
            await _turn(ops, third)
            assert server.accepted == 2
    keys = [request.headers["authorization"] for request in server.requests]
    assert keys == ["Bearer sk-first"] * 3 + ["Bearer sk-second"]


async def test_shutdown_closes_the_pooled_clients(
    home: DaemonHome, server: FakeModelServer, tmp_path: Path
) -> None:
    with trio.fail_after(TIMEOUT):
        async with serving(home, server) as app:
            assert isinstance(app, SessionApplication)
            manager = app.manager
            info = await manager.create(CreateParams(cwd=str(tmp_path), provider="fake"))
            await _turn(SessionOperations(manager), info.session_id)
            assert server.open_connections == 1
            await app.on_shutdown(1.0)
            # The session closed, its client was the pool's: the pool closed it, and with it
            # the kept-alive connection, while this process goes on.
            with trio.fail_after(5):
                await server.wait_all_closed()


async def test_a_key_that_cannot_be_sent_is_a_located_refusal_not_an_internal_error(
    home: DaemonHome, server: FakeModelServer, tmp_path: Path
) -> None:
    """A key the command prints with a space in it cannot travel in a header: session/create
    answers InvalidParams at ``$.provider`` naming the key's source (never the key), nothing
    is built or sent, and a good key afterwards works."""
    with trio.fail_after(TIMEOUT):
        async with serving(home, server) as app:
            assert isinstance(app, SessionApplication)
            manager = app.manager
            (home.root / "key").write_text("sk-secretish key\n")
            create = CreateParams(cwd=str(tmp_path), provider="fake")
            with pytest.raises(InvalidParams) as refused:
                await manager.create(create)
            [issue] = refused.value.issues
            assert issue["path"] == "$.provider"
            assert "api_key_command" in issue["message"]
            assert "secretish" not in issue["message"]
            assert server.accepted == 0
            (home.root / "key").write_text("sk-first\n")
            await _turn(SessionOperations(manager), (await manager.create(create)).session_id)
