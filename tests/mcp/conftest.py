"""Real MCP servers for the tests, installed by the suite itself.

`npm_servers` installs ``@modelcontextprotocol/server-everything`` and
``@modelcontextprotocol/server-filesystem`` (pinned) with npm into the user's cache —
``$XDG_CACHE_HOME/robota-test/npm/<versions>`` as it was before the suite isolated the XDG
folders — once: a later run finds them there. Without node and npm the tests that need them
skip saying so (``.ci/run`` installs both, so CI never skips). The installation holds an
exclusive lock, so concurrent runs never see a half-installed tree.

`fake_servers` are two tiny misbehaving stdio "servers" written in Python: one that never
answers, one whose stdout is garbage.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

EVERYTHING_VERSION = "2026.8.31"
FILESYSTEM_VERSION = "2026.8.31"
#: Bound on the one-time npm installation.
NPM_TIMEOUT = 600.0

_CACHE_ROOT = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "robota-test"


@dataclass(frozen=True)
class NpmServers:
    """Entry scripts of the installed servers, run with `node`."""

    node: str
    everything: Path
    filesystem: Path

    def everything_argv(self) -> list[str]:
        return [self.node, str(self.everything), "stdio"]


def _install(prefix: Path) -> None:
    npm = shutil.which("npm")
    assert npm is not None
    prefix.mkdir(parents=True, exist_ok=True)
    with open(prefix / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (prefix / ".complete").exists():
            return
        subprocess.run(
            [
                npm,
                "install",
                "--no-audit",
                "--no-fund",
                "--loglevel=error",
                "--prefix",
                str(prefix),
                f"@modelcontextprotocol/server-everything@{EVERYTHING_VERSION}",
                f"@modelcontextprotocol/server-filesystem@{FILESYSTEM_VERSION}",
            ],
            check=True,
            timeout=NPM_TIMEOUT,
            stdin=subprocess.DEVNULL,
            capture_output=True,
        )
        (prefix / ".complete").touch()


@pytest.fixture(scope="session")
def npm_servers() -> NpmServers:
    """The installed npm servers (installed on first use; see the module doc)."""
    node = shutil.which("node")
    if node is None or shutil.which("npm") is None:
        pytest.skip("node and npm are needed for the real MCP servers (.ci/run installs them)")
    prefix = _CACHE_ROOT / "npm" / f"everything-{EVERYTHING_VERSION}-fs-{FILESYSTEM_VERSION}"
    if not (prefix / ".complete").exists():
        _install(prefix)
    modules = prefix / "node_modules" / "@modelcontextprotocol"
    return NpmServers(
        node=node,
        everything=modules / "server-everything" / "dist" / "index.js",
        filesystem=modules / "server-filesystem" / "dist" / "index.js",
    )


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
