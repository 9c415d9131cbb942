"""How a robotad tool call looks in an ACP editor: title, kind, locations, diff — sans-I/O.

`describe_call` turns a tool name and its arguments (PROTOCOL.md §4's built-in tools, or any
other tool such as ``mcp__server__tool``) into a `ToolView`. The ACP ``kind`` comes from the
tool's name (built-ins) or its risk class, ``other`` when neither is known. File paths become
``locations``; a Write or an Edit carries a ``diff`` (Write's old text is whatever
`read_current` finds in the file now, before the tool has run; an Edit shows the replaced
fragment; a replayed Write, whose old text is long gone, shows none). Nothing here touches the
file system itself.

A title is shown exactly (`robotactl.terminal_text.visible_exactly`): a control, a bidi
control or a character that draws nothing stands as ``<U+202E>``, ``<U+200B>``. A Bash call's
title is its command, never the description the model gave it: an approval titled "Bash: list
the files" could run anything.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from robotactl.acp.schema import (
    ContentItem,
    DiffItem,
    TextBlock,
    ToolCallContent,
    ToolKind,
    ToolLocation,
)
from robotactl.terminal_text import visible_exactly

__all__ = ["TITLE_CHARS", "ToolView", "describe_call", "result_content"]

#: The longest title an editor is sent (a long command is cut with an ellipsis).
TITLE_CHARS: Final = 120

_KIND_BY_TOOL: Final[dict[str, ToolKind]] = {
    "Read": "read",
    "Write": "edit",
    "Edit": "edit",
    "Bash": "execute",
    "Glob": "search",
    "Grep": "search",
    "WebFetch": "fetch",
}
_KIND_BY_RISK: Final[dict[str, ToolKind]] = {
    "inspect": "read",
    "modify": "edit",
    "execute": "execute",
    "network": "fetch",
}

#: Reads the current text of a file for a Write's diff; None when it does not exist (or is
#: unreadable or too large to show).
ReadCurrent = Callable[[str], str | None]


@dataclass(frozen=True, slots=True)
class ToolView:
    """What an editor shows of one call before it has a result."""

    title: str
    kind: ToolKind
    locations: list[ToolLocation] = field(default_factory=list)
    diff: list[ToolCallContent] = field(default_factory=list)


def describe_call(
    tool: str,
    arguments: Mapping[str, Any],
    *,
    risk: str | None = None,
    read_current: ReadCurrent | None = None,
) -> ToolView:
    """The title, kind, locations and diff of a call of `tool` with `arguments`."""
    kind = _KIND_BY_TOOL.get(tool) or _KIND_BY_RISK.get(risk or "", "other")
    path = _text(arguments, "file_path")
    locations: list[ToolLocation] = []
    if path is not None:
        offset = arguments.get("offset")
        line = offset if tool == "Read" and type(offset) is int and offset >= 0 else None
        locations.append(ToolLocation(path) if line is None else ToolLocation(path, line))
    elif tool in ("Glob", "Grep") and (search_root := _text(arguments, "path")) is not None:
        locations.append(ToolLocation(search_root))
    return ToolView(
        _title(tool, arguments),
        kind,
        locations,
        _diff(tool, arguments, path, read_current),
    )


def result_content(text: str) -> list[ToolCallContent]:
    """A tool result (or a refusal's reason) as tool-call content; nothing for empty text."""
    return [ContentItem(TextBlock(text))] if text else []


def _title(tool: str, arguments: Mapping[str, Any]) -> str:
    """``Read /a/b.py``, ``Bash: make test``, ``Fetch https://…``; the tool's name otherwise.
    Shown exactly, on one line, cut at `TITLE_CHARS`."""
    if tool in ("Read", "Write", "Edit") and (path := _text(arguments, "file_path")):
        title = f"{tool} {path}"
    elif tool == "Bash" and (command := _text(arguments, "command")):
        title = f"Bash: {command}"
    elif tool in ("Glob", "Grep") and (pattern := _text(arguments, "pattern")):
        where = _text(arguments, "path")
        title = f"{tool} {pattern}" + (f" in {where}" if where else "")
    elif tool == "WebFetch" and (url := _text(arguments, "url")):
        title = f"Fetch {url}"
    else:
        title = tool
    title = " ".join(visible_exactly(title).split())  # one line, whatever the command held
    return title if len(title) <= TITLE_CHARS else title[: TITLE_CHARS - 1] + "…"


def _diff(
    tool: str, arguments: Mapping[str, Any], path: str | None, read_current: ReadCurrent | None
) -> list[ToolCallContent]:
    if path is None:
        return []
    if tool == "Write" and (content := _string(arguments, "content")) is not None:
        if read_current is None:  # the old text is unknown (a replay): none is claimed
            return [DiffItem(path, content)]
        return [DiffItem(path, content, read_current(path))]
    if tool == "Edit":
        old_string = _string(arguments, "old_string")
        new_string = _string(arguments, "new_string")
        if old_string is not None and new_string is not None:
            return [DiffItem(path, new_string, old_string)]
    return []


def _string(arguments: Mapping[str, Any], key: str) -> str | None:
    value = arguments.get(key)
    return value if isinstance(value, str) else None


def _text(arguments: Mapping[str, Any], key: str) -> str | None:
    """A non-blank string argument, or None."""
    value = _string(arguments, key)
    return value if value is not None and value.strip() else None
