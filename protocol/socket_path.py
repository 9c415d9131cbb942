"""Where the daemon's socket lives — one resolution for daemon and clients (PROTOCOL.md §1).

First that is set: an explicit path (``--socket``), ``ROBOTA_SOCKET``,
``$XDG_RUNTIME_DIR/robota/robotad.sock``, ``/tmp/robota-$UID/robotad.sock``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

__all__ = ["SOCKET_NAME", "resolve_socket_path"]

SOCKET_NAME = "robotad.sock"


def resolve_socket_path(
    explicit: str | os.PathLike[str] | None = None, environ: Mapping[str, str] | None = None
) -> Path:
    """The socket path a daemon binds and a client connects to. Pure: reads `environ` only."""
    env = os.environ if environ is None else environ
    if explicit:
        return Path(explicit)
    if env.get("ROBOTA_SOCKET"):
        return Path(env["ROBOTA_SOCKET"])
    runtime = env.get("XDG_RUNTIME_DIR")
    if runtime:
        return Path(runtime) / "robota" / SOCKET_NAME
    return Path(f"/tmp/robota-{os.getuid()}") / SOCKET_NAME
