"""Real MCP servers for the tests, installed by the suite itself.

`npm_servers` gives ``@modelcontextprotocol/server-everything`` and
``@modelcontextprotocol/server-filesystem``, installed once into the user's cache
(`tests.mcp.npm_servers`): a later run finds them there. Without node and npm the tests that
need them skip saying so (``.ci/run`` installs both, so CI never skips).

`fake_servers` are two tiny misbehaving stdio "servers" written in Python: one that never
answers, one whose stdout is garbage.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.mcp.npm_servers import NpmServers, installed_servers

__all__ = ["FakeServers", "NpmServers", "fake_servers", "npm_servers"]


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


@dataclass(frozen=True)
class FakeServers:
    python: str
    silent: Path
    garbage: Path


@pytest.fixture(scope="session")
def fake_servers(tmp_path_factory: pytest.TempPathFactory) -> FakeServers:
    """Scripts of a server that never answers and one whose stdout is garbage."""
    root = tmp_path_factory.mktemp("fake-mcp")
    silent = root / "silent.py"
    silent.write_text(SILENT_SERVER)
    garbage = root / "garbage.py"
    garbage.write_text(GARBAGE_SERVER)
    return FakeServers(python=sys.executable, silent=silent, garbage=garbage)
