"""The turn lives in robotad: an editor killed while a permission is pending leaves the
approval parked, and a terminal answers it (PROTOCOL.md §10.6). And a real provider (the
openai one, on a loopback fake model server) streams through to the editor."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import trio

from protocol.blocking_client import open_blocking_connection
from tests.acp.conftest import Launch, agent_argv, open_raw_agent
from tests.acp.editors import EDITOR_TIMEOUT, Editor, open_editor
from tests.acp.proof import assert_editor_received_everything
from tests.acp.sdk_cache import typescript_sdk
from tests.providers.fake_servers import FakeModelServer, Reply, openai_stream
from tests.robotad_process import (
    PROCESS_TIMEOUT,
    REPO,
    RobotadProcess,
    child_environment,
    start_robotad,
    stop_robotad,
)


def robotad_call(daemon: RobotadProcess, method: str, params: dict[str, Any]) -> Any:
    with open_blocking_connection(daemon.socket_path, timeout=30) as client:
        return client.request(method, params)


async def approve_from_a_terminal(daemon: RobotadProcess, session_id: str) -> None:
    """``robotactl approve`` of `session_id`'s pending request, against `daemon` only; it
    succeeds (bounded by PROCESS_TIMEOUT)."""
    ctl = [sys.executable, "-m", "robotactl", "--socket", str(daemon.socket_path)]
    with trio.fail_after(PROCESS_TIMEOUT):
        approved = await trio.run_process(
            [*ctl, "--no-autostart", "approve", "-s", session_id],
            capture_stdout=True,
            capture_stderr=True,
            env=child_environment(),
            cwd=REPO,
            check=False,
        )
    assert approved.returncode == 0, approved.stderr.decode()


async def prompt_until_held(editor: Editor, session_id: str) -> None:
    """Prompt ``write``; return once the editor holds the permission question it is asked."""
    await editor.send(
        op="prompt",
        params={"sessionId": session_id, "prompt": [{"type": "text", "text": "write"}]},
        answers=["hold"],
    )
    held = await editor.next_event()
    assert held["event"] == "held"


async def wait_exit(pid: int) -> None:
    """Return once process `pid` (not our child) has exited: its pidfd turns readable."""
    try:
        pidfd = os.pidfd_open(pid)
    except ProcessLookupError:
        return
    try:
        with trio.fail_after(EDITOR_TIMEOUT):
            await trio.lowlevel.wait_readable(pidfd)
    finally:
        os.close(pidfd)


async def test_editor_killed_while_asking_leaves_the_approval_for_robotactl_approve(
    launch: Launch, workspace: Path, acp_daemon: RobotadProcess, tmp_path: Path
) -> None:
    target = workspace / "kept.txt"
    script = [
        {
            "toolCalls": [
                {"name": "Write", "arguments": {"file_path": str(target), "content": "yes\n"}}
            ]
        },
        {"text": "written after all"},
    ]
    async with launch(script=script) as editor:
        await editor.initialize()
        session_id = await editor.new_session(workspace)
        agent_pid = await editor.agent_pid()
        await prompt_until_held(editor, session_id)
        editor.process.kill()  # the editor dies with the question open
        await editor.process.wait()
        await wait_exit(agent_pid)  # the agent sees its stdin end and leaves
    # Quietly: the prompt ends "cancelled" with nobody to tell, never an internal error.
    logs = "".join(log.read_text() for log in tmp_path.glob("editor-*.log"))
    assert "handler of session/prompt failed" not in logs
    assert "Traceback" not in logs
    pending = robotad_call(acp_daemon, "session/pending", {"sessionId": session_id})["pending"]
    assert [r["tool"] for r in pending["requests"]] == ["Write"]
    assert not target.exists()
    await approve_from_a_terminal(acp_daemon, session_id)
    assert target.read_text() == "yes\n"
    history = robotad_call(acp_daemon, "session/history", {"sessionId": session_id})
    assert history["messages"][-1]["content"] == "written after all"


async def test_an_approval_answered_from_a_terminal_ends_the_editors_question(
    launch: Launch, workspace: Path, acp_daemon: RobotadProcess
) -> None:
    """The editor is asked, a terminal answers first: the turn goes on and the prompt ends
    normally, with the editor's question withdrawn."""
    target = workspace / "from-terminal.txt"
    write = {"name": "Write", "arguments": {"file_path": str(target), "content": "t\n"}}
    async with launch(script=[{"toolCalls": [write]}, {"text": "thanks, terminal"}]) as editor:
        await editor.initialize()
        session_id = await editor.new_session(workspace)
        await prompt_until_held(editor, session_id)
        await approve_from_a_terminal(acp_daemon, session_id)
        reply = await editor.reply()
        assert reply["result"] == {"stopReason": "end_turn"}
        assert target.read_text() == "t\n"
        texts = [
            u["update"]["content"]["text"]
            for u in await editor.updates()
            if u["update"]["sessionUpdate"] == "agent_message_chunk"
        ]
        assert texts == ["thanks, terminal"]


async def test_a_real_provider_streams_through_to_the_editor(
    kind: str, workspace: Path, tmp_path: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """An OpenAI-compatible model on a loopback fake: its streamed deltas reach the editor as
    chunks, its usage as a usage_update."""
    stream = openai_stream(
        ["Stream", "ed ", "from ", "a model"],
        usage={"prompt_tokens": 30, "completion_tokens": 7, "total_tokens": 37},
    )
    server = FakeModelServer([Reply(events=stream)])
    async with trio.open_nursery() as nursery:
        await nursery.start(server.run)
        config = tmp_path / "config.toml"
        config.write_text(
            '[providers.fake]\nkind = "openai"\n'
            f'base_url = "{server.base_url}/v1"\nmodel = "fake-model"\n'
        )
        socket_dir = tmp_path_factory.mktemp("sock")
        socket_dir.chmod(0o700)
        env = child_environment(ROBOTA_CONFIG=str(config))
        daemon = start_robotad(socket_dir / "robotad.sock", tmp_path / "robotad.log", env=env)
        try:
            ts_sdk = typescript_sdk() if kind == "ts" else None
            argv = agent_argv(daemon, "--provider", "fake")
            async with open_editor(kind, argv, tmp_path / "editor.log", ts_sdk) as editor:
                await editor.initialize()
                session_id = await editor.new_session(workspace)
                reply = await editor.prompt(session_id, "hello model")
                assert reply["result"] == {"stopReason": "end_turn"}
                updates = [u["update"] for u in await editor.updates()]
                chunks = [
                    u["content"]["text"]
                    for u in updates
                    if u["sessionUpdate"] == "agent_message_chunk"
                ]
                assert "".join(chunks) == "Streamed from a model"
                assert len(chunks) > 1
                assert {"sessionUpdate": "usage_update", "used": 37, "size": 200000} in updates
                await assert_editor_received_everything(editor)
        finally:
            stop_robotad(daemon)
        nursery.cancel_scope.cancel()
    assert server.requests[0].body["messages"][-1]["content"] == "hello model"


async def test_the_agent_exits_saying_why_when_robotad_goes_away(
    tmp_path: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """Without its daemon the agent can answer nothing: it exits 1 and says so on stderr,
    while stdout carried nothing but ACP."""
    socket_dir = tmp_path_factory.mktemp("sock")
    socket_dir.chmod(0o700)
    daemon = start_robotad(socket_dir / "robotad.sock", tmp_path / "robotad.log")
    try:
        agent = await open_raw_agent(daemon, stderr=subprocess.PIPE)
        assert agent.stderr is not None
        initialize = (
            b'{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1}}\n'
        )
        with trio.fail_after(EDITOR_TIMEOUT):
            await agent.stdin.send_all(initialize)
            answer = b""
            while not answer.endswith(b"\n"):
                answer += await agent.stdout.receive_some(65536)
    finally:
        stop_robotad(daemon)
    try:
        with trio.fail_after(EDITOR_TIMEOUT):
            status = await agent.wait()
            rest = b""
            while chunk := await agent.stdout.receive_some(65536):
                rest += chunk
            stderr = b""
            while chunk := await agent.stderr.receive_some(65536):
                stderr += chunk
    finally:
        if agent.returncode is None:
            agent.kill()
        await agent.wait()
    assert b'"protocolVersion":1' in answer
    assert rest == b""
    assert status == 1
    assert b"closed the connection" in stderr


async def test_a_command_robotad_stopped_under_is_shown_as_of_unknown_outcome(
    kind: str, workspace: Path, tmp_path: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """robotad is killed while an approved Bash runs; the editor loads the session and
    prompts, which gives the uncertain execution up. The editor is told what history says,
    ``outcome unknown: … Check its effect``, never that the approval was given up (the
    command ran) — the same as ``robotactl show``."""
    started = tmp_path / "started"
    os.mkfifo(started)
    bash = {"name": "Bash", "arguments": {"command": f"echo go > {started}; sleep 60"}}
    script = [{"toolCalls": [bash]}, {"text": "after"}, {"text": "the next prompt"}]
    socket_dir = tmp_path_factory.mktemp("sock")
    socket_dir.chmod(0o700)
    env = child_environment(ROBOTA_STATE_DIR=str(tmp_path / "state"))
    daemon = start_robotad(socket_dir / "robotad.sock", tmp_path / "robotad.log", env=env)
    try:
        create = {"cwd": str(workspace), "script": script}
        session_id = robotad_call(daemon, "session/create", create)["sessionId"]
        robotad_call(daemon, "session/run", {"sessionId": session_id, "prompt": "go"})
        pending = robotad_call(daemon, "session/pending", {"sessionId": session_id})["pending"]
        [request] = pending["requests"]
        answer = {"requestId": request["requestId"], "responseId": "r1", "approved": True}
        resume = {"sessionId": session_id, "executionId": pending["executionId"]}

        def approve() -> None:  # returns once robotad is gone (its connection fails)
            with contextlib.suppress(Exception):
                robotad_call(daemon, "session/resume", {**resume, "responses": [answer]})

        async with trio.open_nursery() as nursery:
            nursery.start_soon(trio.to_thread.run_sync, approve)
            with trio.fail_after(EDITOR_TIMEOUT):  # the command runs
                await trio.to_thread.run_sync(started.read_text, abandon_on_cancel=True)
            daemon.process.kill()
    finally:
        stop_robotad(daemon)
    daemon = start_robotad(socket_dir / "robotad.sock", tmp_path / "robotad.log", env=env)
    try:
        ts_sdk = typescript_sdk() if kind == "ts" else None
        async with open_editor(kind, agent_argv(daemon), tmp_path / "editor.log", ts_sdk) as editor:
            await editor.initialize()
            load = {"sessionId": session_id, "cwd": str(workspace), "mcpServers": []}
            await editor.request("session/load", load)
            await editor.updates()
            reply = await editor.prompt(session_id, "again")
            assert reply["result"] == {"stopReason": "end_turn"}
            closed = [
                u["update"] for u in await editor.updates() if u["update"].get("status") == "failed"
            ]
            [text] = [c["content"]["text"] for u in closed for c in u["content"]]
            assert text.startswith("outcome unknown: Bash was running when robotad stopped")
            assert "Check its effect" in text
            await assert_editor_received_everything(editor)
    finally:
        stop_robotad(daemon)
