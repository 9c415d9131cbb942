"""Approvals through an ACP editor: a Write allowed once with its diff, a Bash rejected,
"allow always" remembered as a session rule (G-113), and cancel mid-stream."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from protocol.blocking_client import open_blocking_connection
from tests.acp.conftest import Launch
from tests.acp.proof import assert_editor_received_everything
from tests.robotad_process import RobotadProcess


def tool_updates(updates: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        u["update"]
        for u in updates
        if u["update"]["sessionUpdate"] in ("tool_call", "tool_call_update")
    ]


def robotad_call(daemon: RobotadProcess, method: str, params: dict[str, Any]) -> Any:
    with open_blocking_connection(daemon.socket_path, timeout=30) as client:
        return client.request(method, params)


async def test_write_allowed_once_shows_its_diff(launch: Launch, workspace: Path) -> None:
    target = workspace / "notes.txt"
    target.write_text("old line\n")
    script = [
        {
            "toolCalls": [
                {"name": "Write", "arguments": {"file_path": str(target), "content": "new line\n"}}
            ]
        },
        {"text": "written"},
    ]
    async with launch(script=script) as editor:
        await editor.initialize()
        session_id = await editor.new_session(workspace)
        reply = await editor.prompt(session_id, "write it", answers=["allow_once"])
        assert reply["result"] == {"stopReason": "end_turn"}
        [asked] = reply["permissions"]
        assert [o["kind"] for o in asked["options"]] == [
            "allow_once",
            "allow_always",
            "reject_once",
        ]
        tool_call = asked["toolCall"]
        assert tool_call["kind"] == "edit"
        assert tool_call["locations"] == [{"path": str(target)}]
        assert tool_call["content"] == [
            {"type": "diff", "path": str(target), "oldText": "old line\n", "newText": "new line\n"}
        ]
        assert target.read_text() == "new line\n"
        tools = tool_updates(await editor.updates())
        assert tools[0]["sessionUpdate"] == "tool_call"
        assert tools[0]["toolCallId"] == tool_call["toolCallId"]
        assert tools[0]["status"] == "pending"
        assert tools[0]["title"] == f"Write {target}"
        assert tools[-1]["status"] == "completed"
        assert {
            "type": "diff",
            "path": str(target),
            "oldText": "old line\n",
            "newText": "new line\n",
        } in tools[-1]["content"]
        await assert_editor_received_everything(editor)


async def test_bash_rejected_never_runs(launch: Launch, workspace: Path) -> None:
    marker = workspace / "ran"
    script = [
        {"toolCalls": [{"name": "Bash", "arguments": {"command": f"touch {marker}"}}]},
        {"text": "ok, not running it"},
    ]
    async with launch(script=script) as editor:
        await editor.initialize()
        session_id = await editor.new_session(workspace)
        reply = await editor.prompt(session_id, "run it", answers=["reject_once"])
        assert reply["result"] == {"stopReason": "end_turn"}
        assert reply["permissions"][0]["toolCall"]["kind"] == "execute"
        assert not marker.exists()
        tools = tool_updates(await editor.updates())
        assert tools[-1]["status"] == "failed"
        assert "denied" in tools[-1]["content"][-1]["content"]["text"]
        await assert_editor_received_everything(editor)


async def test_allow_always_adds_a_session_rule_and_the_same_call_is_not_asked_again(
    launch: Launch, workspace: Path, acp_daemon: RobotadProcess
) -> None:
    """G-113: "always" remembers a pattern projected from the call, in the session only."""
    call = {"name": "Bash", "arguments": {"command": "echo hello"}}
    script = [{"toolCalls": [call]}, {"text": "first"}, {"toolCalls": [call]}, {"text": "second"}]
    async with launch(script=script) as editor:
        await editor.initialize()
        session_id = await editor.new_session(workspace)
        first = await editor.prompt(session_id, "once", answers=["allow_always"])
        assert first["result"] == {"stopReason": "end_turn"}
        assert len(first["permissions"]) == 1
        always = next(o for o in first["permissions"][0]["options"] if o["kind"] == "allow_always")
        assert "Bash(echo hello:*)" in always["name"]
        second = await editor.prompt(session_id, "again", answers=["reject_once"])
        assert second.get("result") == {"stopReason": "end_turn"}, second
        assert second["permissions"] == []
        tools = tool_updates(await editor.updates())
        assert [t["status"] for t in tools if t.get("status") == "completed"] == ["completed"] * 2
        await assert_editor_received_everything(editor)
    rules = robotad_call(
        acp_daemon,
        "session/addRule",
        {"sessionId": session_id, "rule": "Read(/nowhere)", "kind": "deny", "scope": "session"},
    )
    assert "Bash(echo hello:*)" in rules["allow"]


async def test_cancel_mid_stream_ends_the_prompt_cancelled(
    launch: Launch, workspace: Path, acp_daemon: RobotadProcess
) -> None:
    script = [{"text": "x" * 400, "chunks": 40, "delayMs": 50}]
    async with launch(script=script) as editor:
        await editor.initialize()
        session_id = await editor.new_session(workspace)
        reply = await editor.prompt(session_id, "talk", cancel_after_chunks=2)
        assert reply["result"] == {"stopReason": "cancelled"}
        chunks = [
            u
            for u in await editor.updates()
            if u["update"]["sessionUpdate"] == "agent_message_chunk"
        ]
        assert 2 <= len(chunks) < 40
        await assert_editor_received_everything(editor)
    info = robotad_call(acp_daemon, "session/get", {"sessionId": session_id})
    assert info["running"] is False
