"""Approvals through an ACP editor: a Write allowed once with its diff, a Bash rejected,
"allow always" remembered as a session rule (G-113), and cancel — of a stream, and of a
turn waiting for approval."""

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


async def test_write_allowed_once_with_its_diff_then_bash_rejected(
    launch: Launch, workspace: Path
) -> None:
    target = workspace / "notes.txt"
    target.write_text("old line\n")
    marker = workspace / "ran"
    write = {"name": "Write", "arguments": {"file_path": str(target), "content": "new line\n"}}
    bash = {"name": "Bash", "arguments": {"command": f"touch {marker}"}}
    diff = {"type": "diff", "path": str(target), "oldText": "old line\n", "newText": "new line\n"}
    script = [{"toolCalls": [write, bash]}, {"text": "written, not run"}]
    async with launch(script=script) as editor:
        await editor.initialize()
        session_id = await editor.new_session(workspace)
        reply = await editor.prompt(session_id, "go", answers=["allow_once", "reject_once"])
        assert reply["result"] == {"stopReason": "end_turn"}
        asked_write, asked_bash = reply["permissions"]
        kinds = [o["kind"] for o in asked_write["options"]]
        assert kinds == ["allow_once", "allow_always", "reject_once"]
        shown = asked_write["toolCall"]
        assert shown["kind"] == "edit"
        assert shown["locations"] == [{"path": str(target)}]
        assert shown["content"] == [diff]
        assert asked_bash["toolCall"]["kind"] == "execute"
        assert target.read_text() == "new line\n"
        assert not marker.exists()
        tools = tool_updates(await editor.updates())
        first = tools[0]
        assert first["sessionUpdate"] == "tool_call"
        assert first["toolCallId"] == shown["toolCallId"]
        assert first["status"] == "pending"
        assert first["title"] == f"Write {target}"
        ends = {
            t["toolCallId"]: t
            for t in tools
            if t["sessionUpdate"] == "tool_call_update"
            and t.get("status") in ("completed", "failed")
        }
        assert ends[shown["toolCallId"]]["status"] == "completed"
        assert diff in ends[shown["toolCallId"]]["content"]
        denied = ends[asked_bash["toolCall"]["toolCallId"]]
        assert denied["status"] == "failed"
        assert "denied" in denied["content"][-1]["content"]["text"]
        await assert_editor_received_everything(editor)


async def test_allow_always_adds_a_session_rule_and_the_same_call_is_not_asked_again(
    launch: Launch, workspace: Path, acp_daemon: RobotadProcess
) -> None:
    """G-113: "always" adds a rule for exactly that call, in the session only."""
    call = {"name": "Bash", "arguments": {"command": "echo hello"}}
    script = [{"toolCalls": [call]}, {"text": "first"}, {"toolCalls": [call]}, {"text": "second"}]
    async with launch(script=script) as editor:
        await editor.initialize()
        session_id = await editor.new_session(workspace)
        first = await editor.prompt(session_id, "once", answers=["allow_always"])
        assert first["result"] == {"stopReason": "end_turn"}
        assert len(first["permissions"]) == 1
        always = next(o for o in first["permissions"][0]["options"] if o["kind"] == "allow_always")
        assert "Bash(echo hello)" in always["name"]
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
    assert "Bash(echo hello)" in rules["allow"]


async def test_cancel_aborts_a_stream_and_abandons_a_waiting_approval(
    launch: Launch, workspace: Path, acp_daemon: RobotadProcess
) -> None:
    target = workspace / "never.txt"
    write = {"name": "Write", "arguments": {"file_path": str(target), "content": "x"}}
    script = [{"text": "x" * 1000, "chunks": 100, "delayMs": 100}, {"toolCalls": [write]}]
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
        assert 2 <= len(chunks) < 100
        info = robotad_call(acp_daemon, "session/get", {"sessionId": session_id})
        assert info["running"] is False
        asked = await editor.prompt(session_id, "write", answers=["cancelled"])
        assert asked["result"] == {"stopReason": "cancelled"}
        assert len(asked["permissions"]) == 1
        await assert_editor_received_everything(editor)
    assert robotad_call(acp_daemon, "session/pending", {"sessionId": session_id})["pending"] is None
    assert not target.exists()


async def test_a_cancel_right_behind_the_prompt_still_stops_the_turn(
    launch: Launch, workspace: Path
) -> None:
    """The abort reached robotad before the turn had started and was refused; the turn then
    ran to its end, tools and all."""
    marker = workspace / "ran"
    bash = {"name": "Bash", "arguments": {"command": f"touch {marker}"}}
    script = [{"text": "x" * 300, "chunks": 30, "delayMs": 50}, {"toolCalls": [bash]}]
    async with launch(script=script) as editor:
        await editor.initialize()
        session_id = await editor.new_session(workspace)
        await editor.request(
            "session/set_mode", {"sessionId": session_id, "modeId": "bypassPermissions"}
        )
        reply = await editor.prompt(session_id, "talk", cancel_at_once=True)
        assert reply["result"] == {"stopReason": "cancelled"}
        await assert_editor_received_everything(editor)
    assert not marker.exists()


async def test_a_cancel_sent_before_the_prompt_does_not_cancel_it(
    launch: Launch, workspace: Path
) -> None:
    """A cancel the editor sent while nothing ran is for nothing: the prompt right behind it
    runs to its end, however the two requests' handlers happen to be scheduled."""
    async with launch(script=[{"text": "answered", "chunks": 3}] * 5) as editor:
        await editor.initialize()
        session_id = await editor.new_session(workspace)
        for _ in range(5):
            reply = await editor.prompt(session_id, "talk", cancel_first=True)
            assert reply["result"] == {"stopReason": "end_turn"}, reply
        await assert_editor_received_everything(editor)


async def test_an_approval_left_parked_is_asked_again_at_the_next_prompt(
    launch: Launch, workspace: Path, acp_daemon: RobotadProcess
) -> None:
    """An approval another client (or an editor that went away) left waiting made every
    prompt fail with -32005: an ACP editor has no way to resume or abandon it."""
    target = workspace / "parked.txt"
    write = {"name": "Write", "arguments": {"file_path": str(target), "content": "x\n"}}
    script = [{"toolCalls": [write]}, {"text": "written"}, {"text": "and now the new prompt"}]
    async with launch(script=script) as editor:
        await editor.initialize()
        session_id = await editor.new_session(workspace)
        parked = robotad_call(acp_daemon, "session/run", {"sessionId": session_id, "prompt": "w"})
        assert parked["status"] == "waiting"
        reply = await editor.prompt(session_id, "next", answers=["allow_once"])
        assert reply["result"] == {"stopReason": "end_turn"}, reply
        assert len(reply["permissions"]) == 1
        assert target.read_text() == "x\n"
        await assert_editor_received_everything(editor)
    history = robotad_call(acp_daemon, "session/history", {"sessionId": session_id})
    said = [m["content"] for m in history["messages"] if m["role"] == "assistant"]
    assert said[-1] == "and now the new prompt"


async def test_an_editor_that_fails_to_answer_is_a_cancelled_question(
    launch: Launch, workspace: Path, acp_daemon: RobotadProcess
) -> None:
    """Its error came back as the prompt's error (or -32603), and the session was then
    stuck with the execution parked."""
    target = workspace / "never.txt"
    write = {"name": "Write", "arguments": {"file_path": str(target), "content": "x"}}
    async with launch(script=[{"toolCalls": [write]}, {"text": "later"}]) as editor:
        await editor.initialize()
        session_id = await editor.new_session(workspace)
        reply = await editor.prompt(session_id, "write", answers=["error"])
        assert reply["result"] == {"stopReason": "cancelled"}, reply
        await assert_editor_received_everything(editor)
    assert robotad_call(acp_daemon, "session/pending", {"sessionId": session_id})["pending"] is None
    assert not target.exists()


async def test_a_cancel_while_a_parked_approval_is_settled_stops_the_new_prompt_too(
    launch: Launch, workspace: Path, acp_daemon: RobotadProcess
) -> None:
    """Decision 71: the editor allowed an approval left parked, cancelled while the execution
    it resumed went on (here, streamed), and the prompt then started its own turn anyway,
    the model answering it, and ended ``end_turn``."""
    target = workspace / "parked.txt"
    write = {"name": "Write", "arguments": {"file_path": str(target), "content": "x\n"}}
    resumed = {"text": "y" * 600, "chunks": 60, "delayMs": 50}
    script = [{"toolCalls": [write]}, resumed, {"text": "the new prompt ran"}]
    async with launch(script=script) as editor:
        await editor.initialize()
        session_id = await editor.new_session(workspace)
        parked = robotad_call(acp_daemon, "session/run", {"sessionId": session_id, "prompt": "w"})
        assert parked["status"] == "waiting"
        reply = await editor.prompt(
            session_id, "next", answers=["allow_once"], cancel_after_chunks=2
        )
        assert reply["result"] == {"stopReason": "cancelled"}, reply
        assert len(reply["permissions"]) == 1
        await assert_editor_received_everything(editor)
    info = robotad_call(acp_daemon, "session/get", {"sessionId": session_id})
    assert info["running"] is False
    assert robotad_call(acp_daemon, "session/pending", {"sessionId": session_id})["pending"] is None
    history = robotad_call(acp_daemon, "session/history", {"sessionId": session_id})
    assert [m["content"] for m in history["messages"] if m["role"] == "user"] == ["w"]
    assert "the new prompt ran" not in [m["content"] for m in history["messages"]]
