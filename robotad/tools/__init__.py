"""The built-in tools (PROTOCOL.md §4) and the tool port they implement.

``builtin_tools()`` gives a fresh instance of each: Read, Write, Edit, Bash, Glob, Grep,
WebFetch. Names, arguments, risk classes and permission argument keys are Claude-Code-
compatible, so existing hooks and permission rules work unchanged. `canonical_path` is the one
spelling of a path argument shared by the permission gate, the hooks, the log and the tools.
"""

from __future__ import annotations

from robotad.agent.tool import (
    ArgumentError,
    ArgumentKind,
    Risk,
    Tool,
    ToolContext,
    ToolProfile,
    ToolResult,
    TypedTool,
)
from robotad.sandbox.confinement import Confinement
from robotad.storage.spill import SpillStore
from robotad.tools.bash import BashTool
from robotad.tools.edit import EditTool
from robotad.tools.glob import GlobTool
from robotad.tools.grep import GrepTool
from robotad.tools.paths import canonical_path
from robotad.tools.read import ReadTool
from robotad.tools.webfetch import WebFetchTool
from robotad.tools.write import WriteTool

__all__ = [
    "ArgumentError",
    "ArgumentKind",
    "BashTool",
    "EditTool",
    "GlobTool",
    "GrepTool",
    "ReadTool",
    "Risk",
    "Tool",
    "ToolContext",
    "ToolProfile",
    "ToolResult",
    "TypedTool",
    "WebFetchTool",
    "WriteTool",
    "builtin_tools",
    "canonical_path",
]


def builtin_tools(
    confinement: Confinement | None = None,
    hidden_variables: frozenset[str] = frozenset(),
    spill: SpillStore | None = None,
) -> list[Tool]:
    """A new instance of every built-in tool, in PROTOCOL.md §4's order; Bash, Write and Edit
    held to `confinement` (the session's sandbox; default: none), Bash's commands never given
    `hidden_variables` (the providers' key variables), Read reading `spill`'s stored results
    by their references."""
    return [
        ReadTool(spill),
        WriteTool(confinement),
        EditTool(confinement),
        BashTool(confinement, hidden_variables),
        GlobTool(),
        GrepTool(),
        WebFetchTool(),
    ]
