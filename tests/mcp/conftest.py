"""Real MCP servers for the tests, installed by the suite itself.

`npm_servers` gives ``@modelcontextprotocol/server-everything`` and
``@modelcontextprotocol/server-filesystem``, installed once into the user's cache
(`tests.mcp.npm_servers`): a later run finds them there. Without node and npm the tests that
need them skip saying so (``.ci/run`` installs both, so CI never skips).

`fake_servers` are tiny stdio servers written in Python: one that never answers, one whose
stdout is garbage, and a real one (the SDK's own server) whose tool `grow` adds a tool `late`
and announces the new list (``notifications/tools/list_changed``).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.mcp.npm_servers import NpmServers, installed_servers

__all__ = ["MCP_TIMEOUT", "FakeServers", "NpmServers", "fake_servers", "npm_servers"]

#: Bound on one block of client I/O that may start MCP servers (node starts slowly on a
#: loaded machine; each server start is bounded by its own startup timeout too).
MCP_TIMEOUT = 60.0


@pytest.fixture(scope="session")
def npm_servers() -> NpmServers:
    """The installed npm servers (installed on first use; see the module doc)."""
    servers = installed_servers()
    if servers is None:
        pytest.skip("node and npm are needed for the real MCP servers (.ci/run installs them)")
    return servers


SILENT_SERVER = "import sys\nfor _ in sys.stdin:\n    pass\n"
GARBAGE_SERVER = (
    "import sys\nsys.stdout.write('hello, I am not JSON-RPC\\n')\nsys.stdout.flush()\n"
    "for _ in sys.stdin:\n    pass\n"
)


GROWING_SERVER = '''
from mcp.server.mcpserver import Context, MCPServer

server = MCPServer("growing")


@server.tool()
async def grow(ctx: Context) -> str:
    """Add the tool `late` and announce the new tool list."""

    def late() -> str:
        """A tool that exists only after grow ran."""
        return "late tool answered"

    server.add_tool(late, name="late")
    await ctx.session.send_tool_list_changed()
    return "grown"


server.run("stdio")
'''


@dataclass(frozen=True)
class FakeServers:
    python: str
    silent: Path
    garbage: Path
    growing: Path


@pytest.fixture(scope="session")
def fake_servers(tmp_path_factory: pytest.TempPathFactory) -> FakeServers:
    """The scripts of the servers in the module doc."""
    root = tmp_path_factory.mktemp("fake-mcp")
    silent = root / "silent.py"
    silent.write_text(SILENT_SERVER)
    garbage = root / "garbage.py"
    garbage.write_text(GARBAGE_SERVER)
    growing = root / "growing.py"
    growing.write_text(GROWING_SERVER)
    return FakeServers(python=sys.executable, silent=silent, garbage=garbage, growing=growing)
