"""An editor's MCP servers as robotad's session-scoped servers (PROTOCOL §10.5, §10.6).

ACP gives a stdio server as ``{name, command, args, env:[{name, value}]}`` and an HTTP one as
``{type: "http", name, url, headers:[{name, value}]}``; robotad's `McpServer` takes `env` and
`headers` as objects and no `type`. A server name robotad would refuse (it takes
``[A-Za-z0-9_-]+``, with no ``__``, no ``_`` at the end and at most `MCP_SERVER_NAME_MAX`
characters) has every other character replaced by ``_``, runs of ``_`` made one, is cut to that
length and loses a trailing ``_``, and a name an earlier server took gets ``-2``, ``-3``…
(within the length), so odd names never keep the editor from starting a session; so does a
name robotad refuses because one of its own configured servers has it (`named_servers` reads
which: robotad's servers are not listed beforehand, since ``mcp/list`` starts them). SSE
servers are not supported by robotad: they are left out, and `mcp_servers` says which. So is
a server robotad refuses (a URL that is no http:// or https:// one, say): `refused_servers`
reads robotad's located issues, and the session starts without it, the log saying why.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Any

from protocol.errors import Issue
from protocol.methods import MCP_SERVER_NAME_MAX
from robotactl.acp.schema import McpServerEntry

__all__ = ["in_editor_terms", "kept_indexes", "mcp_servers", "named_servers", "refused_servers"]

_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")
_SERVER_PATH = re.compile(r"\$\.mcpServers\[([0-9]+)\]")
_RUNS = re.compile(r"__+")
_NAME_PATH = re.compile(r"\$\.mcpServers\[([0-9]+)\]\.name")


def mcp_servers(
    entries: Sequence[McpServerEntry], reserved: Iterable[str] = ()
) -> tuple[list[dict[str, Any]], list[str]]:
    """The ``session/create`` `mcpServers` for `entries`, and the names of those left out
    (with why), in the editor's order. A name robotad's own servers use (`reserved`) gets a
    suffix, as a repeated one does: robotad refuses a session server named like one of its
    own (that server's rules would apply to the editor's)."""
    servers: list[dict[str, Any]] = []
    left_out: list[str] = []
    taken: set[str] = set(reserved)
    for entry in entries:
        name = _unique(_RUNS.sub("_", _UNSAFE.sub("_", entry.name)), taken)
        if entry.type == "sse":  # see _passed_on
            left_out.append(f"{entry.name} (SSE servers are not supported; use streamable HTTP)")
        elif entry.url is not None:
            server: dict[str, Any] = {"name": name, "url": entry.url}
            if entry.headers:
                server["headers"] = {item.name: item.value for item in entry.headers}
            servers.append(server)
        elif entry.command is not None:
            server = {"name": name, "command": entry.command}
            if entry.args:
                server["args"] = list(entry.args)
            if entry.env:
                server["env"] = {item.name: item.value for item in entry.env}
            servers.append(server)
        else:
            left_out.append(f"{entry.name} (neither a command nor a url)")
    return servers, left_out


def kept_indexes(entries: Sequence[McpServerEntry]) -> list[int]:
    """The editor's index of each server `mcp_servers` passes on, in order."""
    return [i for i, entry in enumerate(entries) if _passed_on(entry)]


def _passed_on(entry: McpServerEntry) -> bool:
    return entry.type != "sse" and (entry.url is not None or entry.command is not None)


def in_editor_terms(issues: Sequence[Issue], kept: Sequence[int]) -> list[Issue]:
    """robotad's issues about the servers passed on, their ``$.mcpServers[i]`` renumbered to
    the editor's own list (`kept`: the editor's index of each server passed on)."""

    def renumber(match: re.Match[str]) -> str:
        index = int(match.group(1))
        return f"$.mcpServers[{kept[index] if index < len(kept) else index}]"

    return [{**issue, "path": _SERVER_PATH.sub(renumber, issue["path"])} for issue in issues]


def refused_servers(issues: Sequence[Issue]) -> dict[int, str] | None:
    """The index (in the list robotad got) of each server robotad's `issues` are about, with
    what it said; None when any issue is about something else (the session itself)."""
    refused: dict[int, str] = {}
    for issue in issues:
        match = _SERVER_PATH.match(issue["path"])
        if match is None:
            return None
        index = int(match.group(1))
        member = issue["path"][match.end() :].lstrip(".")
        said = f"{member}: {issue['message']}" if member else issue["message"]
        refused[index] = f"{refused[index]}; {said}" if index in refused else said
    return refused or None


def named_servers(issues: Sequence[Issue]) -> set[int]:
    """The index (in the list robotad got) of each server whose name robotad refused: names
    `mcp_servers` made are well formed and distinct, so that name is one of robotad's own
    configured servers' (decision 70)."""
    return {int(m.group(1)) for i in issues if (m := _NAME_PATH.fullmatch(i["path"]))}


def _unique(name: str, taken: set[str]) -> str:
    """`name` (cleaned) cut to `MCP_SERVER_NAME_MAX`, or ``name-2``, ``name-3``… when an
    earlier server took it (``my server`` and ``my_server`` both clean to ``my_server``), each
    within the length; the chosen name is added to `taken`."""
    chosen, number = _cut(name, ""), 1
    while chosen in taken:
        number += 1
        chosen = _cut(name, f"-{number}")
    taken.add(chosen)
    return chosen


def _cut(name: str, suffix: str) -> str:
    """`name` cut so that it and `suffix` fit `MCP_SERVER_NAME_MAX`, without a trailing
    ``_`` (``server`` when nothing is left), then `suffix`."""
    kept = name[: MCP_SERVER_NAME_MAX - len(suffix)].rstrip("_") or "server"
    return kept + suffix
