"""The session's own refusal of a malformed setting, before the wire knows of it.

A session validates what it is built with and what it is told between turns: permission rules
and modes, hook tables, path patterns, the compaction threshold, its working directory. A
malformed one raises `InvalidSetting` listing every problem, each located by the setting's
JSON path within the session's settings (``$.permissions.allow[0]``, ``$.permissionMode``,
``$.rule``) — the protocol names its parameters after the same settings, so a host serving
them over JSON-RPC maps the error to InvalidParams once, at its edge (`robotad.daemon.edge`),
re-rooting the paths where the settings came from elsewhere (an imported record).
"""

from __future__ import annotations

from collections.abc import Iterable

from protocol.errors import Issue

__all__ = ["InvalidSetting", "at"]


class InvalidSetting(ValueError):
    """One or more malformed settings; `issues` locates each (``{"path", "message"}``)."""

    def __init__(self, issues: Iterable[Issue]) -> None:
        self.issues: list[Issue] = list(issues)
        super().__init__("; ".join(f"{i['path']}: {i['message']}" for i in self.issues))


def at(path: str, message: str) -> InvalidSetting:
    """One malformed setting at `path`."""
    return InvalidSetting([{"path": path, "message": message}])
