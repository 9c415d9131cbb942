"""Where the daemon's socket lives — one resolution for daemon and clients (PROTOCOL.md §1).

First that is set: an explicit path (``--socket``), ``ROBOTA_SOCKET``,
``$XDG_RUNTIME_DIR/robota/robotad.sock``, ``/tmp/robota-$UID/robotad.sock``.
"""

from __future__ import annotations

import os

#: `typing` is not imported for this: ``robotactl status`` resolves the socket without it.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from pathlib import Path

__all__ = ["SOCKET_NAME", "resolve_socket_name", "resolve_socket_path"]

SOCKET_NAME = "robotad.sock"


def resolve_socket_path(
    explicit: str | os.PathLike[str] | None = None, environ: Mapping[str, str] | None = None
) -> Path:
    """The socket path a daemon binds and a client connects to. Pure: reads `environ` only."""
    from pathlib import Path

    return Path(resolve_socket_name(explicit, environ))


def resolve_socket_name(
    explicit: str | os.PathLike[str] | None = None, environ: Mapping[str, str] | None = None
) -> str:
    """`resolve_socket_path` as a string, for callers that must not pay for `pathlib`."""
    env = os.environ if environ is None else environ
    if explicit:
        return os.fspath(explicit)
    if env.get("ROBOTA_SOCKET"):
        return env["ROBOTA_SOCKET"]
    runtime = env.get("XDG_RUNTIME_DIR")
    if runtime:
        return os.path.join(runtime, "robota", SOCKET_NAME)
    return os.path.join(f"/tmp/robota-{os.getuid()}", SOCKET_NAME)
