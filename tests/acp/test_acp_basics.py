"""``robotactl acp`` against both official ACP SDKs: initialize, new, prompt, modes, list."""

from __future__ import annotations

from pathlib import Path

from tests.acp.conftest import Launch
from tests.acp.proof import assert_editor_received_everything


async def test_initialize_offers_load_list_resume_close(launch: Launch) -> None:
    async with launch() as editor:
        result = await editor.initialize()
        assert result["protocolVersion"] == 1
        capabilities = result["agentCapabilities"]
        assert capabilities["loadSession"] is True
        assert set(capabilities["sessionCapabilities"]) >= {"list", "resume", "close"}
        assert result["agentInfo"]["name"] == "robotactl"


async def test_prompt_streams_chunks_as_they_come(launch: Launch, workspace: Path) -> None:
    script = [{"text": "Hello from robota, in pieces", "chunks": 4}]
    async with launch(script=script) as editor:
        await editor.initialize()
        session_id = await editor.new_session(workspace)
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
