"""A session built and then refused before it was live — its journal damaged, the save after
a recovery's put-back refused, its requester gone while it was prepared — lets go of
everything it held, each once, through the session's own release path (`Session.release`,
architecture decision 78). The manager closed only the journal, and the provider when it got
that far: the log's descriptor stayed open (its sink in `open_logs`) and the session's MCP
servers stayed registered, one more for every failed open of the day."""

from __future__ import annotations

import errno
import json
import shutil
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import trio

from protocol.errors import InvalidParams, RecordCorrupt
from protocol.methods import (
    ApprovalResponse,
    CreateParams,
    McpServer,
    ResumeParams,
    RunParams,
    ScriptedToolCall,
    Step,
)
from protocol.shapes import TurnWaiting
from robotad.daemon.live import RecordWriter
from robotad.daemon.manager import SessionManager
from robotad.daemon.operations import SessionOperations
from robotad.mcp.hub import McpHub
from robotad.providers.scripted import ScriptedProvider
from robotad.session.ports import SessionSnapshot
from robotad.storage.failure import StorageError
from robotad.storage.log_files import log_paths, open_logs
from robotad.storage.record import SessionRecord
from tests.storage.test_storage_log_sink_open import descriptors_of

from .conftest import SHUTDOWN_TIMEOUT, running_manager
from .test_daemon_journal_damage import parked_with_a_damaged_journal

TIMEOUT = 20.0


def bash(command: str) -> ScriptedToolCall:
    """A Bash call: it waits for approval in the default permission mode."""
    return ScriptedToolCall(name="Bash", arguments={"command": command})


def approve(waiting: TurnWaiting) -> list[ApprovalResponse]:
    return [
        ApprovalResponse(request_id=r.request_id, response_id=f"yes-{r.request_id}", approved=True)
        for r in waiting.requests
    ]


@pytest.fixture
def provider_closes(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every close of a scripted provider, by the test's count (one entry each)."""
    closes: list[str] = []
    aclose = ScriptedProvider.aclose

    async def counted(provider: ScriptedProvider) -> None:
        closes.append(provider.name)
        await aclose(provider)

    monkeypatch.setattr(ScriptedProvider, "aclose", counted)
    return closes


async def test_a_load_whose_recovery_cannot_save_lets_go_of_its_log(
    manager: SessionManager,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    provider_closes: list[str],
) -> None:
    """What a kill leaves between journaling a round and saving it: the record holds the
    first call open, the journal the round after it. The load puts that round back — its
    lines go to the session's log, which opens its file — and then cannot save it (a full
    disk): the load is refused, and the log's file is closed, its sink out of `open_logs`
    (it stayed open: a descriptor per failed load). The provider is closed once."""
    ops = SessionOperations(manager)
    script = [Step(tool_calls=[bash("true")]), Step(tool_calls=[bash(":")]), Step(text="done")]
    with trio.fail_after(TIMEOUT):
        info = await manager.create(CreateParams(cwd=str(tmp_path), script=script))
        session_id = info.session_id
        record = manager.store.path_for(session_id)
        first = await ops.run(RunParams(session_id=session_id, prompt="go"), None)
        assert isinstance(first, TurnWaiting)
        first_round = record.read_bytes()
        params = ResumeParams(session_id, first.execution_id, approve(first))
        second = await ops.resume(params, None)
        assert isinstance(second, TurnWaiting)  # the round after the first journaled, saved
        await manager.close(session_id)
        record.write_bytes(first_round)  # the save of that round never happened
        log_file, payloads = log_paths(manager.logs_dir, session_id)
        log_file.unlink()  # nor did its lines: the put-back writes them
        shutil.rmtree(payloads, ignore_errors=True)
        provider_closes.clear()

        def refuse(record: SessionRecord, **_: object) -> SessionRecord:
            path = f"sessions/{record.id}.json"
            raise StorageError(path, "no space left on device", errno.ENOSPC)

        sinks = open_logs.count()  # the prompt history's
        with monkeypatch.context() as full:
            full.setattr(manager.store, "save", refuse)
            with pytest.raises(StorageError):
                await manager.session(session_id)
        assert log_file.exists()  # the put-back's lines were written
        left_open = (descriptors_of(log_file), open_logs.count() - sinks)
        closes = list(provider_closes)

        live = await manager.session(session_id)  # once the disk has room, it loads
    assert left_open == (0, 0)
    assert closes == ["scripted"]
    assert live.pending() is not None


async def test_a_load_whose_requester_leaves_while_it_is_prepared_lets_go_of_it(
    manager: SessionManager,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    provider_closes: list[str],
) -> None:
    """A load cancelled (its requester went away) once its session was built, before it
    was activated: the built session was dropped as it was, its provider (a pooled SDK
    client's lease) never closed. It is closed once, and the session loads again."""
    with trio.fail_after(TIMEOUT):
        info = await manager.create(CreateParams(cwd=str(tmp_path), script=[Step(text="hi")]))
        await manager.close(info.session_id)
    assert provider_closes == ["scripted"]  # a close lets go once, in its shutdown
    provider_closes.clear()
    entered = trio.Event()

    async def held(writer: RecordWriter, snapshot: SessionSnapshot) -> None:
        entered.set()
        await trio.sleep_forever()

    with monkeypatch.context() as patched, trio.fail_after(TIMEOUT):
        patched.setattr(RecordWriter, "remember", held)
        async with trio.open_nursery() as requester:
            requester.start_soon(manager.session, info.session_id)
            await entered.wait()
            requester.cancel_scope.cancel()
    closes = list(provider_closes)
    with trio.fail_after(TIMEOUT):
        live = await manager.session(info.session_id)
    assert closes == ["scripted"]
    assert live.session.get_history() == []


@pytest.fixture
async def mcp_manager(tmp_path: Path, nursery: trio.Nursery) -> AsyncIterator[SessionManager]:
    """A running manager whose sessions may have MCP servers of their own."""
    hub = McpHub({})
    await nursery.start(hub.run)
    async with running_manager(tmp_path / "state", nursery, mcp=hub) as manager:
        yield manager
    with trio.fail_after(SHUTDOWN_TIMEOUT):
        await hub.aclose()


async def test_a_load_refused_for_a_damaged_journal_lets_go_of_its_mcp_servers(
    mcp_manager: SessionManager, tmp_path: Path, provider_closes: list[str]
) -> None:
    """A session with an MCP server of its own whose journal is damaged: each load is
    refused (RecordCorrupt), and the server it registered goes with it. It stayed
    registered, so ``mcp/list`` listed — and started — the servers of a session that was
    not loaded, never stopped until the daemon's shutdown. The provider is closed once a
    load, the journal's lock let go (the next load takes it)."""
    manager = mcp_manager
    hub = manager.assembler.mcp
    assert hub is not None
    own = McpServer(name="own", command=str(tmp_path / "no-such-server"))
    script = [Step(tool_calls=[bash("true")]), Step(text="done")]
    params = CreateParams(cwd=str(tmp_path), script=script, mcp_servers=[own])
    with trio.fail_after(TIMEOUT):
        session_id, _, _ = await parked_with_a_damaged_journal(manager, params)
        provider_closes.clear()
        for _ in range(2):
            with pytest.raises(RecordCorrupt):
                await manager.session(session_id)
        listed = await hub.listing()
    assert [entry.scope for entry in listed] == []
    assert provider_closes == ["scripted", "scripted"]


async def test_a_load_its_session_refuses_to_build_lets_go_of_its_mcp_servers(
    mcp_manager: SessionManager, tmp_path: Path, provider_closes: list[str]
) -> None:
    """A stored session with an MCP server of its own whose record holds a rule the session
    refuses (written by hand, or by a robotad that took it): the assembly registered the
    session's servers with the hub before the `Session` constructor refused the rule, and
    let go of the provider only, so ``mcp/list`` listed — and started — the servers of a
    session that was never built, until the daemon stopped. Each refused load now takes its
    registration back; the provider is closed once a load."""
    manager = mcp_manager
    hub = manager.assembler.mcp
    assert hub is not None
    own = McpServer(name="own", command=str(tmp_path / "no-such-server"))
    params = CreateParams(cwd=str(tmp_path), script=[Step(text="hi")], mcp_servers=[own])
    with trio.fail_after(TIMEOUT):
        info = await manager.create(params)
        await manager.close(info.session_id)
        path = manager.store.path_for(info.session_id)
        stored = json.loads(path.read_bytes())
        stored["record"]["settings"]["permissions"]["deny"].append("Bash(")
        path.write_text(json.dumps(stored))
        provider_closes.clear()
        for _ in range(2):
            with pytest.raises(InvalidParams) as refused:
                await manager.session(info.session_id)
            assert refused.value.issues[0]["path"] == "$.permissions.deny[0]"
        listed = await hub.listing()
    assert [entry.scope for entry in listed] == []
    assert provider_closes == ["scripted", "scripted"]
