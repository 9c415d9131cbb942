"""``robotactl acp`` against both official ACP SDKs: the handshake and a streamed prompt."""

from __future__ import annotations

from pathlib import Path

from protocol.client import open_connection
from tests.acp.conftest import Launch
from tests.acp.proof import assert_editor_received_everything
from tests.robotad_process import RobotadProcess


async def test_initialize_new_and_a_prompt_streamed_in_chunks(
    launch: Launch, workspace: Path, acp_daemon: RobotadProcess
) -> None:
    """An editor's MCP server becomes the session's own robotad server (PROTOCOL §10.6): this
    one names a command that does not exist, so robotad lists it failed, and the turn still
    completes (a server's failure is never a failed turn, §10.5)."""
    script = [{"text": "Hello from robota, in pieces", "chunks": 4}]
    async with launch(script=script) as editor:
        result = await editor.initialize()
        assert result["protocolVersion"] == 1
        capabilities = result["agentCapabilities"]
        assert capabilities["loadSession"] is True
        assert set(capabilities["sessionCapabilities"]) >= {"list", "resume", "close"}
        assert result["agentInfo"]["name"] == "robotactl"
        server = {
            "name": "notes",
            "command": "notes-mcp",
            "args": ["--stdio"],
            "env": [{"name": "NOTES_DIR", "value": "/tmp"}],
        }
        session_id = await editor.new_session(workspace, mcpServers=[server])
        reply = await editor.prompt(session_id, "hi")
        assert reply["result"] == {"stopReason": "end_turn"}
        updates = [u["update"] for u in await editor.updates()]
        chunks = [
            u["content"]["text"] for u in updates if u["sessionUpdate"] == "agent_message_chunk"
        ]
        assert len(chunks) == 4
        assert "".join(chunks) == "Hello from robota, in pieces"
        assert any(u["sessionUpdate"] == "usage_update" for u in updates)
        await assert_editor_received_everything(editor)
    async with open_connection(acp_daemon.socket_path) as robotad:
        listed = await robotad.request("mcp/list", {"sessionId": session_id})
    servers = {server["name"]: server for server in listed["servers"]}
    assert servers["notes"]["scope"] == "session"
    assert servers["notes"]["status"] == "failed"
    assert servers["notes"]["error"].startswith("cannot start")
