"""Answers to approval requests: once, always (an exact-call rule), or no.

`a` ("always") answers the request yes and first adds a session allow rule for that exact
call (``session/addRule {kind: "allow", scope: "session"}``), so an identical call later in
the session runs without asking. The rule is projected from the call's permission argument
(PROTOCOL.md §4): the path for Read/Write/Edit (``file_path``) and Glob/Grep (``path``, the
session's cwd when absent), the exact command for Bash (written as a pattern that matches
only itself, not a prefix family: the person saw this command, not others), and the host for
WebFetch (``WebFetch(domain:host)``, §10.7). A tool without a permission argument (an MCP
tool) has no exact rule: `exact_call_rule` returns None and the chat answers that request
once, saying so.

Pure functions; the controller sends the requests.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any, Final, Literal
from urllib.parse import urlsplit

__all__ = ["ARGUMENT_KEYS", "Answer", "escape_pattern_text", "exact_call_rule", "response"]

#: How a person answered: y (once), a (always), n (no).
Answer = Literal["once", "always", "deny"]

#: Built-in tool → its permission argument (PROTOCOL.md §4).
ARGUMENT_KEYS: Final[dict[str, str]] = {
    "Read": "file_path",
    "Write": "file_path",
    "Edit": "file_path",
    "Bash": "command",
    "Glob": "path",
    "Grep": "path",
    "WebFetch": "url",
}
_PATH_KEYS: Final = frozenset({"file_path", "path"})


def escape_pattern_text(text: str) -> str:
    """`text` as a pattern argument that matches exactly itself (``*``, ``(``, ``)`` and
    ``\\`` escaped; a leading ``domain:`` escaped so it is not read as the domain form)."""
    escaped = "".join("\\" + ch if ch in "*()\\" else ch for ch in text)
    return escaped.replace("domain:", "domain\\:", 1) if text.startswith("domain:") else escaped


def exact_call_rule(tool: str, arguments: Mapping[str, Any], cwd: str) -> str | None:
    """The allow rule that covers exactly this call, or None when the tool has none."""
    key = ARGUMENT_KEYS.get(tool)
    if key is None:
        return None
    value = arguments.get(key)
    if value is None and key in _PATH_KEYS:
        value = cwd
    if not isinstance(value, str) or not value.strip():
        return None
    if key == "url":
        host = urlsplit(value).hostname
        return f"{tool}(domain:{host})" if host else None
    return f"{tool}({escape_pattern_text(value)})"


def response(request_id: str, approved: bool) -> dict[str, Any]:
    """One ``session/resume`` response with a fresh ``responseId``."""
    return {"requestId": request_id, "responseId": uuid.uuid4().hex, "approved": approved}
