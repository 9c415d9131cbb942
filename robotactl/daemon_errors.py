"""Why robotactl has no (working) connection to robotad: the errors `connection`, `autostart`
and `unanswered` raise.

Their messages are for a person; `socket_path` says where robotactl looked.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["DaemonNotRunning", "DaemonStartFailed", "DaemonUnavailable", "DaemonUnresponsive"]


class DaemonUnavailable(Exception):
    """No connection to robotad at `socket_path`; the message says why, for a person."""

    def __init__(self, message: str, socket_path: Path) -> None:
        super().__init__(message)
        self.socket_path = socket_path


class DaemonNotRunning(DaemonUnavailable):
    """Nothing listens at the socket and autostart is off."""

    def __init__(self, socket_path: Path) -> None:
        import os

        # Say what turned autostart off: the variable set somewhere out of sight (when it
        # reads as true, as click reads it), else the flag.
        variable = os.environ.get("ROBOTA_NO_AUTOSTART", "").strip().lower()
        switch = (
            "unset ROBOTA_NO_AUTOSTART"
            if variable in ("1", "true", "t", "yes", "y", "on")
            else "drop --no-autostart"
        )
        super().__init__(
            f"robotad is not running at {os.path.abspath(socket_path)} (start it with "
            f"`robotad` or {switch})",
            socket_path,
        )


class DaemonStartFailed(DaemonUnavailable):
    """robotactl started robotad (or waited for another client to), and it never served."""


class DaemonUnresponsive(DaemonUnavailable):
    """robotad took the connection but answers nothing on it, nor on another (stopped, or
    stuck); `pid` is its process when known."""

    def __init__(self, message: str, socket_path: Path, pid: int | None) -> None:
        super().__init__(message, socket_path)
        self.pid = pid
