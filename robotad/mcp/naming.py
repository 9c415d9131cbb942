"""How an MCP server's tools are named to the model, the rules and the hooks.

Claude Code's and Codex's convention: ``mcp__SERVER__TOOL``. Each part keeps ``A-Z a-z 0-9 _
-`` and turns every other character into ``_``; a name longer than `MAX_TOOL_NAME` (the
OpenAI function-name limit) is cut and ends in ``_`` plus eight hex digits of a hash of the
full name, so two long names never collide and the same name always maps the same way; a tool
whose name cleans to one an earlier tool of its server took ends in its hash too
(`model_tool_names`).

Permission rules name ``mcp__SERVER`` (every tool of that server) or ``mcp__SERVER__TOOL``;
`rule_covers` is that one decision.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from typing import Final

__all__ = [
    "MAX_TOOL_NAME",
    "PREFIX",
    "model_tool_name",
    "model_tool_names",
    "rule_covers",
    "sanitise",
]

PREFIX: Final = "mcp__"
#: The longest tool name providers accept (OpenAI: ``^[a-zA-Z0-9_-]{1,64}$``).
MAX_TOOL_NAME: Final = 64
_OTHER = re.compile(r"[^A-Za-z0-9_-]")
_HASH_CHARS: Final = 8


def sanitise(part: str) -> str:
    """`part` with every character outside ``A-Z a-z 0-9 _ -`` replaced by ``_``."""
    return _OTHER.sub("_", part) or "_"


def model_tool_name(server: str, tool: str, *, hashed: bool = False) -> str:
    """``mcp__SERVER__TOOL`` for the model, sanitised and capped (see the module doc); with
    `hashed`, the hash ends it even when it fits."""
    full = f"{PREFIX}{sanitise(server)}__{sanitise(tool)}"
    if len(full) <= MAX_TOOL_NAME and not hashed:
        return full
    digest = hashlib.sha256(f"{server}\0{tool}".encode()).hexdigest()[:_HASH_CHARS]
    return f"{full[: MAX_TOOL_NAME - _HASH_CHARS - 1]}_{digest}"


def model_tool_names(server: str, tools: Sequence[str]) -> list[str]:
    """`model_tool_name` of each of a server's `tools`, in order; a tool whose name cleans to
    one an earlier tool took (``read.file`` after ``read_file``) ends in its hash, so every
    tool of the server can be called."""
    names: list[str] = []
    for tool in tools:
        name = model_tool_name(server, tool)
        names.append(model_tool_name(server, tool, hashed=True) if name in names else name)
    return names


def rule_covers(rule_tool: str, tool_name: str) -> bool:
    """Whether a rule naming `rule_tool` applies to calls of `tool_name`: the same name, or
    a server rule ``mcp__SERVER`` and one of that server's tools ``mcp__SERVER__…``."""
    if rule_tool == tool_name:
        return True
    return (
        rule_tool.startswith(PREFIX)
        and "__" not in rule_tool[len(PREFIX) :]
        and tool_name.startswith(rule_tool + "__")
    )
