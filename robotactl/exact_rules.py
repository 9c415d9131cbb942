"""The allow rule an "always" answer adds: one that covers exactly the call that was approved.

robotactl's approval prompt, `robotactl chat` and `robotactl acp` all offer "always"; this is
their one definition of the rule it writes (PROTOCOL §4 patterns, written client-side because
clients never import the daemon). A path or command is escaped so the rule matches only itself;
a WebFetch gets its host's domain rule (PROTOCOL §10.7); an MCP tool, whose rules name tools
and never arguments (PROTOCOL §10.5), gets its own name (``mcp__SERVER__TOOL``: every call of
that one tool, as the offer says); any other tool has no exact rule.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Final

from protocol.pattern_text import escape_pattern_text, url_host

__all__ = ["ARGUMENT_KEYS", "escape_pattern_text", "exact_call_rule", "url_host"]

#: The argument a built-in tool's `Tool(pattern)` rule matches (PROTOCOL §4).
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
#: An MCP tool's name as the model sees it: ``mcp__SERVER__TOOL``.
_MCP_TOOL: Final = re.compile(r"mcp__[A-Za-z0-9_-]+?__[A-Za-z0-9_-]+\Z")


def exact_call_rule(tool: str, arguments: Mapping[str, Any], cwd: str) -> str | None:
    """The allow rule that covers exactly this call, or None when the tool has none. A path
    tool called without its path (Glob, Grep) works in `cwd`."""
    key = ARGUMENT_KEYS.get(tool)
    if key is None:
        return tool if _MCP_TOOL.match(tool) else None
    value = arguments.get(key)
    if value is None and key in _PATH_KEYS:
        value = cwd
    if not isinstance(value, str) or not value.strip():
        return None
    if key == "url":
        host = url_host(value)
        return f"{tool}(domain:{host})" if host else None
    return f"{tool}({escape_pattern_text(value)})"
