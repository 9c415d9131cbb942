"""A daemon with no MCP server configured never loads the SDK: its start-up and memory are what
they were before MCP support (the SDK costs ~0.6 s and ~44 MB to import)."""

from __future__ import annotations

from pathlib import Path

import trio

from tests.daemon_helpers import RunningDaemon, connect, module_daemon
from tests.mcp.conftest import MCP_TIMEOUT

daemon = module_daemon()


def sdk_loaded(pid: int) -> bool:
    """Whether the process has the SDK's compiled validation core (pydantic-core, which only
    the SDK brings into robotad) mapped."""
    return "pydantic_core" in Path(f"/proc/{pid}/maps").read_text()


async def test_a_turn_without_mcp_servers_never_loads_the_sdk(
    daemon: RunningDaemon, tmp_path: Path
) -> None:
    (tmp_path / "a.txt").write_text("hello\n")
    read = {"name": "Read", "arguments": {"file_path": str(tmp_path / "a.txt")}}
    with trio.fail_after(MCP_TIMEOUT):
        async with connect(daemon) as client:
            info = await client.call(
                "session/create",
                {"cwd": str(tmp_path), "script": [{"toolCalls": [read]}, {"text": "done"}]},
            )
            result = await client.call(
                "session/run", {"sessionId": info["sessionId"], "prompt": "go"}
            )
            listed = await client.call("mcp/list", {})
    assert result["status"] == "completed"
    assert listed == {"servers": []}
    assert not sdk_loaded(daemon.pid)
