"""robotad's permission modes, offered to the editor as ACP session modes.

The mode ids are robotad's mode names (PROTOCOL.md §5 ``session/setPermissionMode``), so an
editor's ``session/set_mode {modeId}`` forwards unchanged and robotad refuses what it refuses
(``auto`` without a classifier: -32013, with robotad's message).
"""

from __future__ import annotations

from typing import Final

from robotactl.acp.schema import SessionMode, SessionModeState

__all__ = ["MODES", "mode_state"]

#: Every permission mode, in the order an editor lists them.
MODES: Final = (
    SessionMode("default", "Default", "Ask before edits and commands"),
    SessionMode("acceptEdits", "Accept edits", "Edit files without asking; ask before commands"),
    SessionMode("plan", "Plan", "Read and search only; no edits or commands"),
    SessionMode("bypassPermissions", "Bypass permissions", "Run everything; deny rules still win"),
    SessionMode("auto", "Auto", "A configured classifier decides where you would be asked"),
)


def mode_state(current: str) -> SessionModeState:
    """The ``modes`` member of a session/new, load or resume result."""
    return SessionModeState(current, list(MODES))
