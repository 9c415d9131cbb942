"""Sessions through an ACP editor: modes, list, load with history replayed in a new process,
resume and close, errors named by robotad, and two editors following one session."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import trio

from protocol.blocking_client import open_blocking_connection
from tests.acp.conftest import Launch, open_raw_agent
from tests.acp.editors import EDITOR_TIMEOUT, EditorError
from tests.acp.proof import assert_editor_received_everything
from tests.robotad_process import RobotadProcess


def robotad_call(daemon: RobotadProcess, method: str, params: dict[str, Any]) -> Any:
    with open_blocking_connection(daemon.socket_path, timeout=30) as client:
        return client.request(method, params)


def kinds_of(updates: list[dict[str, Any]]) -> list[str]:
    return [u["update"]["sessionUpdate"] for u in updates]


async def test_modes_are_permission_modes_and_list_shows_robotads_sessions(
    launch: Launch, workspace: Path, acp_daemon: RobotadProcess, tmp_path: Path
) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    async with launch() as editor:
        await editor.initialize()
        created = await editor.request("session/new", {"cwd": str(workspace), "mcpServers": []})
        session_id = created["sessionId"]
        modes = created["modes"]
        assert modes["currentModeId"] == "default"
        assert [m["id"] for m in modes["availableModes"]] == [
            "default",
            "acceptEdits",
            "plan",
            "bypassPermissions",
            "auto",
        ]
        await editor.request("session/set_mode", {"sessionId": session_id, "modeId": "acceptEdits"})
        info = robotad_call(acp_daemon, "session/get", {"sessionId": session_id})
        assert info["permissionMode"] == "acceptEdits"
        updates = await editor.updates()
        assert updates[-1]["update"] == {
            "sessionUpdate": "current_mode_update",
            "currentModeId": "acceptEdits",
        }
        with pytest.raises(EditorError) as refused:
            await editor.request("session/set_mode", {"sessionId": session_id, "modeId": "bogus"})
        assert refused.value.code == -32602
        assert "$.modeId" in refused.value.message  # the editor's own member, not robotad's
        servers = [
            {"type": "sse", "name": "old", "url": "http://127.0.0.1:9/sse", "headers": []},
            {"type": "http", "name": "web", "url": "ftp://127.0.0.1/x", "headers": []},
        ]
        # Servers robotad cannot use are left out, and the session starts without them (one
        # bad URL in an editor's settings refused every new thread); the log says why.
        third = tmp_path / "third"
        third.mkdir()
        without = await editor.new_session(third.resolve(), mcpServers=servers)
        assert robotad_call(acp_daemon, "mcp/list", {"sessionId": without})["servers"] == [
            server
            for server in robotad_call(acp_daemon, "mcp/list", {})["servers"]
            if server["scope"] == "daemon"
        ]
        log = (tmp_path / "editor-0.log").read_text()
        assert "MCP server from the editor is not used: old (SSE servers" in log
        assert "MCP server from the editor is not used: web (url: " in log
        there = await editor.new_session(elsewhere.resolve())
        listed = await editor.request("session/list", {})
        ids = [s["sessionId"] for s in listed["sessions"]]
        assert {session_id, without, there} <= set(ids)
        entry = next(s for s in listed["sessions"] if s["sessionId"] == session_id)
        assert entry["cwd"] == str(workspace)
        assert entry["updatedAt"].endswith("Z")
        only_here = await editor.request("session/list", {"cwd": str(workspace)})
        assert [s["sessionId"] for s in only_here["sessions"]] == [session_id]
        change = {"sessionId": session_id, "mode": "plan"}  # from a terminal, say
        robotad_call(acp_daemon, "session/setPermissionMode", change)
        await editor.updates()
        await editor.prompt(session_id, "which mode?")
        told = [u["update"] for u in await editor.updates()]
        assert told[-1] == {"sessionUpdate": "current_mode_update", "currentModeId": "plan"}
        await assert_editor_received_everything(editor)


async def test_load_in_a_new_process_replays_the_history(launch: Launch, workspace: Path) -> None:
    target = workspace / "a.txt"
    script = [
        {
            "text": "Writing it.",
            "toolCalls": [
                {"name": "Write", "arguments": {"file_path": str(target), "content": "A\n"}}
            ],
        },
        {"text": "Done."},
    ]
    async with launch(script=script) as first:
        await first.initialize()
        session_id = await first.new_session(workspace)
        reply = await first.prompt(session_id, "write a.txt", answers=["allow_once"])
        assert reply["result"] == {"stopReason": "end_turn"}
    async with launch() as second:
        await second.initialize()
        loaded = await second.request(
            "session/load", {"sessionId": session_id, "cwd": str(workspace), "mcpServers": []}
        )
        assert loaded["modes"]["currentModeId"] == "default"
        replayed = await second.updates()  # all of them arrived before the load's answer
        assert kinds_of(replayed) == [
            "user_message_chunk",
            "agent_message_chunk",
            "tool_call",
            "agent_message_chunk",
        ]
        updates = [u["update"] for u in replayed]
        assert updates[0]["content"] == {"type": "text", "text": "write a.txt"}
        assert updates[1]["content"]["text"] == "Writing it."
        call = updates[2]
        assert call["status"] == "completed"
        assert call["kind"] == "edit"
        assert call["rawInput"] == {"file_path": str(target), "content": "A\n"}
        assert {"type": "diff", "path": str(target), "newText": "A\n"} in call["content"]
        assert updates[3]["content"]["text"] == "Done."
        await assert_editor_received_everything(second)


async def test_resume_reattaches_close_detaches_and_unknown_sessions_are_errors(
    launch: Launch, workspace: Path, acp_daemon: RobotadProcess
) -> None:
    async with launch(script=[{"text": "first"}, {"text": "second"}]) as editor:
        await editor.initialize()
        session_id = await editor.new_session(workspace)
        await editor.prompt(session_id, "one")
        await editor.request("session/close", {"sessionId": session_id})
        listed = robotad_call(acp_daemon, "session/list", {})["sessions"]
        assert session_id in [s["sessionId"] for s in listed]  # closing detached only
        await editor.updates()
        await editor.request("session/resume", {"sessionId": session_id, "cwd": str(workspace)})
        assert await editor.updates() == []
        load = {"sessionId": session_id, "cwd": str(workspace), "mcpServers": []}
        await editor.request("session/load", load)  # attached already: replayed, one forwarder
        replayed = [u["update"]["sessionUpdate"] for u in await editor.updates()]
        assert replayed == ["user_message_chunk", "agent_message_chunk"]
        reply = await editor.prompt(session_id, "two")
        assert reply["result"] == {"stopReason": "end_turn"}
        texts = [
            u["update"]["content"]["text"]
            for u in await editor.updates()
            if u["update"]["sessionUpdate"] == "agent_message_chunk"
        ]
        assert texts == ["second"]
        for method in ("session/load", "session/resume"):  # never a fresh session instead
            with pytest.raises(EditorError) as missing:
                await editor.request(
                    method,
                    {"sessionId": "no-such-session", "cwd": str(workspace), "mcpServers": []},
                )
            assert missing.value.code == -32002
            assert "no-such-session" in missing.value.message
        with pytest.raises(EditorError) as bad_id:
            await editor.request(
                "session/load", {"sessionId": "../etc", "cwd": str(workspace), "mcpServers": []}
            )
        assert bad_id.value.code == -32602


async def test_two_editors_follow_one_session(launch: Launch, workspace: Path) -> None:
    script = [{"text": "shared reply", "chunks": 2}]
    async with launch(script=script) as driver, launch() as follower:
        await driver.initialize()
        await follower.initialize()
        session_id = await driver.new_session(workspace)
        await follower.request("session/resume", {"sessionId": session_id, "cwd": str(workspace)})
        reply = await driver.prompt(session_id, "for both of you")
        assert reply["result"] == {"stopReason": "end_turn"}
        seen = [u["update"] for u in await follower.updates()]
        prompts = [u["content"]["text"] for u in seen if u["sessionUpdate"] == "user_message_chunk"]
        assert prompts == ["for both of you"]
        text = [u["content"]["text"] for u in seen if u["sessionUpdate"] == "agent_message_chunk"]
        assert "".join(text) == "shared reply"
        driver_saw = [u["update"]["sessionUpdate"] for u in await driver.updates()]
        assert "user_message_chunk" not in driver_saw  # the driver shows its own prompt
        await assert_editor_received_everything(follower)


async def test_a_second_prompt_while_the_first_asks_says_this_editor_is_prompting(
    workspace: Path, acp_daemon: RobotadProcess
) -> None:
    """Two prompts at once on one session: the second is -32001 naming this editor's own
    prompt, also while the first settles a parked approval and has no turn yet (robotad's
    "busy with work that belongs to no turn" read as someone else's work). Raw ACP: the SDK
    editors send one prompt at a time."""
    write = {"name": "Write", "arguments": {"file_path": str(workspace / "w"), "content": "x"}}
    create = {"cwd": str(workspace), "script": [{"toolCalls": [write]}, {"text": "done"}]}
    session_id = robotad_call(acp_daemon, "session/create", create)["sessionId"]
    robotad_call(acp_daemon, "session/run", {"sessionId": session_id, "prompt": "park"})
    agent = await open_raw_agent(acp_daemon)
    buffer = b""

    async def send(request_id: int | None, method: str, params: dict[str, Any]) -> None:
        message = {"jsonrpc": "2.0", "method": method, "params": params}
        if request_id is not None:
            message["id"] = request_id
        assert agent.stdin is not None
        await agent.stdin.send_all(json.dumps(message).encode() + b"\n")

    async def until(test: Any) -> dict[str, Any]:
        nonlocal buffer
        assert agent.stdout is not None
        while True:
            while b"\n" not in buffer:
                data = await agent.stdout.receive_some(65536)
                assert data, "the agent exited"
                buffer += data
            line, buffer = buffer.split(b"\n", 1)
            message: dict[str, Any] = json.loads(line)
            if test(message):
                return message

    prompt = {"sessionId": session_id, "prompt": [{"type": "text", "text": "again"}]}
    try:
        with trio.fail_after(EDITOR_TIMEOUT):
            await send(1, "session/resume", {"sessionId": session_id, "cwd": str(workspace)})
            await until(lambda m: m.get("id") == 1)
            await send(2, "session/prompt", prompt)
            asked = await until(lambda m: m.get("method") == "session/request_permission")
            await send(3, "session/prompt", prompt)
            busy = await until(lambda m: m.get("id") == 3)
            cancelled = {"outcome": {"outcome": "cancelled"}}
            await agent.stdin.send_all(
                json.dumps({"jsonrpc": "2.0", "id": asked["id"], "result": cancelled}).encode()
                + b"\n"
            )
            first = await until(lambda m: m.get("id") == 2)
            await agent.stdin.aclose()
            assert await agent.wait() == 0
    finally:
        if agent.returncode is None:
            agent.kill()
            await agent.wait()
    assert first["result"] == {"stopReason": "cancelled"}
    assert busy["error"]["code"] == -32001
    assert busy["error"]["message"] == (
        f"session {session_id} is busy with a prompt this editor sent: wait for it to end, "
        "or cancel it"
    )
