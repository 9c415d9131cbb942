"""The real MCP servers from npm, installed once into the user's cache (tests and bench).

`installed_servers` installs ``@modelcontextprotocol/server-everything`` and
``@modelcontextprotocol/server-filesystem`` (pinned) with npm into
``$XDG_CACHE_HOME/robota-test/npm/<versions>`` — the cache as it was when this module was first
imported, before the test suite isolates the XDG folders — unless a complete installation is
there already; an exclusive lock keeps concurrent runs from seeing a half-installed tree.
Without node or npm it returns None.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

__all__ = ["EVERYTHING_VERSION", "FILESYSTEM_VERSION", "NpmServers", "installed_servers"]

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


def installed_servers() -> NpmServers | None:
    """The installed servers (installing them first when needed); None without node/npm."""
    node = shutil.which("node")
    if node is None or shutil.which("npm") is None:
        return None
    prefix = _CACHE_ROOT / "npm" / f"everything-{EVERYTHING_VERSION}-fs-{FILESYSTEM_VERSION}"
    if not (prefix / ".complete").exists():
        _install(prefix)
    modules = prefix / "node_modules" / "@modelcontextprotocol"
    return NpmServers(
        node=node,
        everything=modules / "server-everything" / "dist" / "index.js",
        filesystem=modules / "server-filesystem" / "dist" / "index.js",
    )
