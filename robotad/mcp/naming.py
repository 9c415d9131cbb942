"""How an MCP server's tools are named to the model, the rules and the hooks.

Claude Code's and Codex's convention: ``mcp__SERVER__TOOL``. The tool part keeps ``A-Z a-z
0-9 _ -`` and turns every other character into ``_`` (a server's name is made of those
already: `robotad.mcp.config.name_problem`). Providers take tool names of at most
`MAX_TOOL_NAME` characters, so a longer name is cut — in its tool part only: every name offered
for a server's tools starts with the whole ``mcp__SERVER__`` (decision 68). A cut tool part
ends in ``_`` plus eight hex digits of a hash of the server's and the tool's names, so two long
names never collide and the same name always maps the same way; a tool whose name cleans to
one an earlier tool of its server took ends in its hash too (`model_tool_names`). A server
name longer than `MAX_SERVER_NAME` leaves too little room for that and is refused.

Permission rules name ``mcp__SERVER`` (every tool of that server) or one tool, by the name it
is offered under or by its full name ``mcp__SERVER__TOOL`` (cleaned, never cut): `rule_names`
are the names a tool answers to besides the one offered, and `rule_covers` is that one
decision. A rule gives an MCP tool no argument pattern: MCP tools have no argument a pattern
could match, so `written_for_mcp` tells the parser which names to refuse one for (decision 73),
and which names to refuse outright when their ``mcp__`` is in another case, as no name offered
is (decision 81).
Hook matchers are searched in the name offered, which always starts with ``mcp__SERVER__``.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Collection, Sequence
from typing import Final

from protocol.methods import MCP_SERVER_NAME_MAX

__all__ = [
    "MAX_SERVER_NAME",
    "MAX_TOOL_NAME",
    "MIN_TOOL_PART",
    "PREFIX",
    "SEPARATOR",
    "model_tool_name",
    "model_tool_names",
    "rule_covers",
    "rule_names",
    "sanitise",
    "server_rule",
    "written_for_mcp",
]

PREFIX: Final = "mcp__"
#: What parts a name: ``mcp__SERVER__TOOL``.
SEPARATOR: Final = "__"
#: The longest tool name providers accept (OpenAI: ``^[a-zA-Z0-9_-]{1,64}$``).
MAX_TOOL_NAME: Final = 64
_OTHER = re.compile(r"[^A-Za-z0-9_-]")
_HASH_CHARS: Final = 8
#: The longest server name: ``mcp__SERVER__`` leaves a tool part at least `MIN_TOOL_PART` long.
MAX_SERVER_NAME: Final = MCP_SERVER_NAME_MAX
#: The shortest room a tool part has: a cut one keeps 7 characters of the tool's name before
#: ``_`` and its hash (``get_wea_1a2b3c4d``).
MIN_TOOL_PART: Final = MAX_TOOL_NAME - len(PREFIX) - MAX_SERVER_NAME - len(SEPARATOR)


def sanitise(part: str) -> str:
    """`part` with every character outside ``A-Z a-z 0-9 _ -`` replaced by ``_``."""
    return _OTHER.sub("_", part) or "_"


def server_rule(server: str) -> str:
    """``mcp__SERVER``: the rule naming every tool of `server`."""
    return f"{PREFIX}{sanitise(server)}"


def model_tool_name(server: str, tool: str, *, hashed: bool = False) -> str:
    """``mcp__SERVER__TOOL`` for the model, its tool part cleaned and cut to fit (see the
    module doc); with `hashed`, the hash ends it even when it fits. Raises ValueError for a
    server name longer than `MAX_SERVER_NAME` (robotad refuses such a name before a server of
    it runs)."""
    prefix = f"{server_rule(server)}{SEPARATOR}"
    room = MAX_TOOL_NAME - len(prefix)
    if room < MIN_TOOL_PART:
        raise ValueError(f"the MCP server name {server!r} is longer than {MAX_SERVER_NAME}")
    part = sanitise(tool)
    if len(part) <= room and not hashed:
        return prefix + part
    digest = hashlib.sha256(f"{server}\0{tool}".encode()).hexdigest()[:_HASH_CHARS]
    return f"{prefix}{part[: room - _HASH_CHARS - 1]}_{digest}"


def model_tool_names(server: str, tools: Sequence[str]) -> list[str]:
    """`model_tool_name` of each of a server's `tools`, in order; a tool whose name cleans to
    one an earlier tool took (``read.file`` after ``read_file``) ends in its hash, so every
    tool of the server can be called."""
    names: list[str] = []
    for tool in tools:
        name = model_tool_name(server, tool)
        names.append(model_tool_name(server, tool, hashed=True) if name in names else name)
    return names


def rule_names(server: str, tool: str) -> tuple[str, str]:
    """The names a rule may give a tool of `server` besides the one it is offered under: its
    server's, ``mcp__SERVER``, and its full name, ``mcp__SERVER__TOOL`` cleaned and never cut
    (a rule written for a tool whose name was cut, or that shares its cleaned name with
    another tool of the server, covers it)."""
    return server_rule(server), f"{server_rule(server)}{SEPARATOR}{sanitise(tool)}"


def written_for_mcp(rule_tool: str) -> bool:
    """Whether a rule's tool part is written for an MCP server or tool: it starts with
    ``mcp__`` in any case. Only ``mcp__`` itself can cover a tool (every name offered for one
    starts so), but no other tool is named so in any case either: ``Mcp__srv__tool`` is an MCP
    name mistyped, never a tool of its own."""
    return rule_tool[: len(PREFIX)].lower() == PREFIX


def rule_covers(rule_tool: str, tool_name: str, names: Collection[str] = ()) -> bool:
    """Whether a rule naming `rule_tool` applies to calls of `tool_name`, a tool that also
    answers to `names` (its `rule_names`, by its origin; none for a built-in tool, or a name no
    tool has now): the same name, one of `names`, or a server rule ``mcp__SERVER`` and a name
    ``mcp__SERVER__…`` — which every name offered for that server's tools starts with, and no
    other server's does (a server name holds no ``__`` and does not end in ``_``)."""
    if rule_tool == tool_name or rule_tool in names:
        return True
    server = rule_tool[len(PREFIX) :]
    return (
        rule_tool.startswith(PREFIX)
        and bool(server)
        and SEPARATOR not in server
        and not server.endswith("_")
        and tool_name.startswith(rule_tool + SEPARATOR)
    )
