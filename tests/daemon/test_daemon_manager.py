"""The session manager in process: concurrent loads and creates, project-rule persistence
failures, and the shutdown drain (the wire is covered by the other test_daemon_* modules)."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import msgspec
import pytest
import trio
import trio.testing

from protocol.errors import NotAllowed, SessionExists, TurnAborted
from protocol.jsonrpc import ConnectionLost
from protocol.methods import (
    AddRuleParams,
    ApprovalResponse,
    CreateParams,
    Permissions,
    ResumeParams,
    RunParams,
    ScriptedToolCall,
    Step,
)
from protocol.shapes import TurnCompleted, TurnRunning, TurnWaiting
from robotad.config import Config, decode_config
from robotad.daemon.assembly import SessionAssembler
from robotad.daemon.live import LiveSession
from robotad.daemon.manager import SessionManager
from robotad.daemon.operations import SessionOperations
from robotad.storage.journal import FileExecutionJournal

TIMEOUT = 20.0


async def test_concurrent_uses_of_a_stored_session_load_it_once(
    manager: SessionManager, tmp_path: Path
) -> None:
    """Loads of one id are serialised: two requests racing for an unloaded session get the
    same live session (one SessionStart, one hub)."""
    with trio.fail_after(TIMEOUT):
        info = await manager.create(CreateParams(cwd=str(tmp_path)))
        await manager.close(info.session_id)
        found: list[LiveSession] = []

        async def use() -> None:
            found.append(await manager.session(info.session_id))

        async with trio.open_nursery() as racing:
            for _ in range(3):
                racing.start_soon(use)
    assert len({id(live) for live in found}) == 1
    log = (tmp_path / "state" / "logs" / f"{info.session_id}.jsonl").read_text()
    starts = [line for line in log.splitlines() if json.loads(line)["event"] == "session_start"]
    assert len(starts) == 2  # the create's, then exactly one reload


async def test_a_session_whose_journal_another_process_holds_is_refused_by_name(
    manager: SessionManager, tmp_path: Path
) -> None:
    """Another writer holding a session's journal (another program, or a robotad over the same
    state folder) is a named refusal, not an internal error; the session loads once it lets
    go."""
    with trio.fail_after(TIMEOUT):
        info = await manager.create(CreateParams(cwd=str(tmp_path), session_id="held"))
        await manager.close(info.session_id)
        other = FileExecutionJournal(tmp_path / "state", "held")
        await other.open()
        try:
            with pytest.raises(NotAllowed, match="open in another process"):
                await manager.session("held")
        finally:
            await other.aclose()
        assert (await manager.session("held")).session_id == "held"


async def test_racing_creates_of_one_id_make_one_session(
    manager: SessionManager, tmp_path: Path
) -> None:
    """G-005: of two creates of the same id, exactly one succeeds; the other is SessionExists."""
    outcomes: list[str] = []

    async def create() -> None:
        try:
            await manager.create(CreateParams(cwd=str(tmp_path), session_id="raced"))
            outcomes.append("created")
        except SessionExists:
            outcomes.append("exists")

    with trio.fail_after(TIMEOUT):
        async with trio.open_nursery() as racing:
            racing.start_soon(create)
            racing.start_soon(create)
    assert sorted(outcomes) == ["created", "exists"]


async def test_a_project_rule_that_cannot_be_saved_is_not_added(
    manager: SessionManager, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """G-114 (daemon level): session/addRule {scope: "project"} that cannot persist fails
    with NotAllowed (-32014) and adds nothing, not even to the session."""
    ops = SessionOperations(manager)

    def failing(cwd: str, rule: str, kind: str) -> dict[str, list[str]]:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(manager.assembler.project_rules, "add", failing)
    with trio.fail_after(TIMEOUT):
        info = await manager.create(CreateParams(cwd=str(tmp_path)))
        with pytest.raises(NotAllowed):
            await ops.add_rule(
                AddRuleParams(session_id=info.session_id, rule="Read", kind="deny", scope="project")
            )
        rules = await ops.add_rule(
            AddRuleParams(session_id=info.session_id, rule="Glob", kind="allow", scope="session")
        )
    assert (rules.allow, rules.ask, rules.deny) == (["Glob"], [], [])


async def test_shutdown_drains_closes_and_persists_every_session(
    manager: SessionManager, tmp_path: Path
) -> None:
    """PROTOCOL §5 daemon/shutdown (manager side): running work finishes within the grace,
    then every session is closed and its record holds the settled history (G-010)."""
    ops = SessionOperations(manager)
    step = Step(text="slow reply", chunks=5, delay_ms=20)
    with trio.fail_after(TIMEOUT):
        busy = await manager.create(CreateParams(cwd=str(tmp_path), script=[step]))
        idle = await manager.create(CreateParams(cwd=str(tmp_path)))
        started = await ops.run(
            RunParams(session_id=busy.session_id, prompt="go", wait=False), None
        )
        assert manager.counts()[:2] == (2, 1)
        await manager.shutdown(10)
    assert isinstance(started, TurnRunning)
    assert manager.counts() == (0, 0, 0)
    assert manager.loaded(idle.session_id) is None
    record = json.loads(manager.store.path_for(busy.session_id).read_bytes())["record"]
    assert [m["content"] for m in record["messages"]] == ["go", "slow reply"]
    with pytest.raises(NotAllowed):
        await manager.session(busy.session_id)


async def test_an_abort_right_after_running_was_answered_finds_the_turn(
    manager: SessionManager, tmp_path: Path
) -> None:
    """PROTOCOL §5: once ``session/run {wait:false}`` answered "running", ``session/abort``
    must find the turn, also before its task has begun: it begins aborted."""
    ops = SessionOperations(manager)
    with trio.fail_after(TIMEOUT):
        info = await manager.create(CreateParams(cwd=str(tmp_path)))
        live = await manager.session(info.session_id)
        started = await ops.run(
            RunParams(session_id=info.session_id, prompt="go", wait=False), None
        )
        assert isinstance(started, TurnRunning)
        assert not live.session.is_running()  # accepted, not begun: the window at issue
        assert await ops.abort(info.session_id) is True
        with pytest.raises(TurnAborted):
            await ops.run(
                RunParams(session_id=info.session_id, prompt="go", turn_id=started.turn_id), None
            )
        assert await ops.abort(info.session_id) is False  # nothing left to abort
    assert live.session.get_history() == []  # it never began: nothing claims it did


async def test_a_close_right_after_running_was_answered_lets_the_turn_finish_first(
    manager: SessionManager, tmp_path: Path
) -> None:
    """PROTOCOL §5: a turn answered "running" delivers its result as ``turn_finished``; a
    ``session/close`` that comes before the turn has claimed the session drains it like a
    running one (it used to be refused "shut down": no turn_finished, only session_closed)."""
    ops = SessionOperations(manager)
    with trio.fail_after(TIMEOUT):
        info = await manager.create(CreateParams(cwd=str(tmp_path)))
        live = await manager.session(info.session_id)
        seen: list[str] = []

        async def send(event: dict[str, object]) -> None:
            seen.append(str(event["type"]))

        live.hub.subscribe("watcher", send)
        # Hold the accepted turn before its claim: the window a close may fall into.
        gate, run_recoverable = trio.Event(), live.session.run_recoverable

        async def gated(*args: Any, **kwargs: Any) -> TurnCompleted | TurnWaiting:
            await gate.wait()
            return await run_recoverable(*args, **kwargs)

        live.session.run_recoverable = gated  # type: ignore[method-assign]
        started = await ops.run(
            RunParams(session_id=info.session_id, prompt="go", wait=False), None
        )
        async with trio.open_nursery() as nursery:
            nursery.start_soon(manager.close, info.session_id)
            await trio.testing.wait_all_tasks_blocked()
            gate.set()
        outcome = await ops.run(
            RunParams(session_id=info.session_id, prompt="go", turn_id=started.turn_id), None
        )
        await live.hub_done.wait()
    assert isinstance(outcome, TurnCompleted)
    assert seen[0] == "turn_started"
    assert seen[-2:] == ["turn_finished", "session_closed"]


class _Connection:
    """A subscriber standing for one client connection; `closed` once the client left."""

    def __init__(self) -> None:
        self.closed = False

    async def notify(self, method: str, params: Any = None, *, checkpoint: bool = True) -> None:
        if self.closed:
            raise ConnectionLost("connection closed")


async def test_connections_that_left_are_unsubscribed_when_another_subscribes(
    manager: SessionManager, tmp_path: Path
) -> None:
    """A connection that subscribed and left is dropped when a send to it fails; a session
    that publishes nothing (one waiting for approval, for days) kept every such connection,
    so the daemon grew with each client that looked in. A new subscription drops them."""
    ops = SessionOperations(manager)
    with trio.fail_after(TIMEOUT):
        info = await manager.create(CreateParams(cwd=str(tmp_path)))
        live = await manager.session(info.session_id)
        gone = [_Connection() for _ in range(3)]
        for connection in gone:
            await ops.subscribe(info.session_id, connection, None)
            connection.closed = True
        staying = _Connection()
        await ops.subscribe(info.session_id, staying, None)
        assert live.hub.subscribers == frozenset({staying})


async def test_the_daemon_keeps_a_journal_only_while_an_answer_may_come(
    manager: SessionManager, tmp_path: Path
) -> None:
    """robotad hosts the journal (G-099): a turn that asked for nothing leaves no journal file
    once its record is saved; one that waited keeps its file after it completed, so a
    redelivered answer is still idempotent (G-084)."""
    ops = SessionOperations(manager)
    write = ScriptedToolCall(name="Write", arguments={"file_path": "out.txt", "content": "x"})
    read = ScriptedToolCall(name="Read", arguments={"file_path": "out.txt"})
    script = [
        Step(text="plain"),
        Step(tool_calls=[write]),
        Step(text="wrote it"),
        Step(tool_calls=[read]),
        Step(text="read it"),
    ]
    with trio.fail_after(TIMEOUT):
        info = await manager.create(
            CreateParams(cwd=str(tmp_path), script=script, permissions=Permissions(allow=["Read"]))
        )
        journal_dir = tmp_path / "state" / "journal" / info.session_id
        sid = info.session_id
        assert isinstance(
            await ops.run(RunParams(session_id=sid, prompt="hi"), None), TurnCompleted
        )
        live = manager.loaded(sid)
        assert live is not None
        await live.journal.settled()  # retiring a journal is not waited for by the turn
        assert list(journal_dir.iterdir()) == []
        waiting = await ops.run(RunParams(session_id=sid, prompt="write"), None)
        assert isinstance(waiting, TurnWaiting)
        answer = ApprovalResponse(waiting.requests[0].request_id, "resp-1", True)
        resume = ResumeParams(session_id=sid, execution_id=waiting.execution_id, responses=[answer])
        assert await ops.resume(resume, None) == TurnCompleted(
            turn_id=waiting.turn_id, response="wrote it"
        )
        assert await ops.resume(resume, None) == TurnCompleted(
            turn_id=waiting.turn_id, response="wrote it"
        )
        assert isinstance(
            await ops.run(RunParams(session_id=sid, prompt="read"), None), TurnCompleted
        )
        await live.journal.settled()
    assert [p.name for p in journal_dir.iterdir()] == [f"{waiting.execution_id}.jsonl"]


def test_a_script_is_not_judged_against_a_provider_whose_name_was_refused(tmp_path: Path) -> None:
    """``provider`` of the wrong shape is taken out before the create's own checks run; the
    script is then not judged against the default provider (an openai one here), which would
    report a script "only for a scripted provider" the person never asked for."""
    config = decode_config('default_provider = "openai"\n')
    assembler = SessionAssembler.from_config(config, state_dir=tmp_path / "state")
    params = CreateParams(cwd=str(tmp_path), script=[Step(text="x")])
    judged_alone = [i["path"] for i in assembler.create_issues(params, frozenset())]
    assert "$.script" in judged_alone  # the default provider takes no script
    assert assembler.create_issues(params, frozenset({"provider"})) == []


def test_a_session_server_may_not_take_the_name_of_a_configured_one(tmp_path: Path) -> None:
    """An editor's server named like one of robotad's own would fall under the rules written
    for that one (``allow = ["mcp__files"]``) and hide its tools: -32602 at its name."""
    config = decode_config('[mcp_servers.files]\ncommand = "files-mcp"\n')
    assembler = SessionAssembler.from_config(config, state_dir=tmp_path / "state")
    params = msgspec.convert(
        {"cwd": str(tmp_path), "mcpServers": [{"name": "files", "command": "other-mcp"}]},
        CreateParams,
    )
    [issue] = assembler.create_issues(params, frozenset())
    assert issue["path"] == "$.mcpServers[0].name"
    assert "[mcp_servers.files]" in issue["message"]
    renamed = msgspec.convert(
        {"cwd": str(tmp_path), "mcpServers": [{"name": "files-2", "command": "other-mcp"}]},
        CreateParams,
    )
    assert assembler.create_issues(renamed, frozenset()) == []


async def test_start_up_removes_the_sidecar_temp_files_a_killed_daemon_left(
    tmp_path: Path, nursery: trio.Nursery
) -> None:
    """A daemon killed while it wrote a log sidecar leaves the sidecar's temp file in
    ``logs/<id>.payloads/``; it stayed until the session was deleted. The next daemon sweeps
    them once it serves (so 10,000 sessions' folders do not delay its first answer), leaving
    every sidecar, and a temp file of its own (newer than its start) being written."""
    state = tmp_path / "state"
    payloads = state / "logs" / "s1.payloads"
    payloads.mkdir(parents=True)
    sidecar = payloads / ("a" * 64)
    sidecar.write_bytes(b"{}")
    left = [payloads / f".{'b' * 64}.0123456789abcdef.tmp", state / "logs" / ".s2.jsonl.1.tmp"]
    for path in left:
        path.write_bytes(b"half of a sidec")
        os.utime(path, (time.time() - 60, time.time() - 60))  # the killed daemon's
    being_written = payloads / f".{'c' * 64}.fedcba9876543210.tmp"
    elsewhere = tmp_path / "elsewhere"  # a link in place of a folder is not followed
    elsewhere.mkdir()
    (elsewhere / ".x.0123456789abcdef.tmp").write_bytes(b"not ours")
    os.utime(elsewhere / ".x.0123456789abcdef.tmp", (0, 0))
    (state / "logs" / "s3.payloads").symlink_to(elsewhere)
    assembler = SessionAssembler.from_config(Config(), state_dir=state)
    manager = SessionManager(
        state_dir=state, assembler=assembler, nursery=nursery, idle_unload_seconds=0
    )
    with trio.fail_after(TIMEOUT):
        await nursery.start(manager.run)
        being_written.write_bytes(b"this daemon's")  # after its start
        while any(path.exists() for path in left):  # the sweep runs beside the serving
            await trio.sleep(0.01)
        await manager.shutdown(0)
    assert sidecar.read_bytes() == b"{}"
    assert being_written.exists()
    assert (elsewhere / ".x.0123456789abcdef.tmp").exists()
