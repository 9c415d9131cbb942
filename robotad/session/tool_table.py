"""A session's tools: its fixed ones, plus those a `ToolSource` offers turn by turn.

The built-in tools are registered once. A `ToolSource` (the daemon's MCP servers) offers
further tools that can change between turns — a server started, restarted or announcing a new
tool list — so `refresh`, awaited at the start of each turn's loop, replaces the added tools
with the source's current ones. `tools` and `profiles` are the very dicts the turn loop and the
permission enforcer read, so a refreshed tool is offered to the model and judged by its own
profile from that turn on. A source's tool that would shadow a fixed tool is ignored.

`aclose` releases the source (a session's own servers stop with it). A call of a name no tool
has now is explained by the source when it can (`missing_reason`: the name is an MCP server's
whose server is down), so the model reads why, not "unknown tool".
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Protocol

from robotad.agent.tool import Tool, ToolProfile
from robotad.session.registered_tool import register

__all__ = ["ToolSource", "ToolTable"]

logger = logging.getLogger("robotad.session")


class ToolSource(Protocol):
    """Tools beyond the fixed ones, as they are now."""

    async def tools(self) -> Sequence[Tool]:
        """The current tools; may start what provides them (cancellable)."""
        ...

    async def aclose(self) -> None:
        """The session is closing."""
        ...

    def missing_reason(self, name: str) -> str | None:
        """Why `name`, no tool now, cannot be called (its server is down), or None."""
        ...


class _Tools(dict[str, Tool]):
    """The name → tool dict of a table, which can say why a name is missing
    (`robotad.agent.tool.missing_tool_reason`)."""

    def __init__(self, tools: dict[str, Tool], source: ToolSource | None) -> None:
        super().__init__(tools)
        self.source = source

    def missing_reason(self, name: str) -> str | None:
        return None if self.source is None else self.source.missing_reason(name)


class ToolTable:
    """The tools and profiles of one session (see the module doc)."""

    def __init__(self, tools: Sequence[Tool], source: ToolSource | None = None) -> None:
        self.tools: dict[str, Tool] = _Tools({tool.name: register(tool) for tool in tools}, source)
        self.profiles: dict[str, ToolProfile] = {
            name: tool.profile for name, tool in self.tools.items()
        }
        self._fixed = frozenset(self.tools)
        self.source = source

    async def refresh(self) -> None:
        """Replace the added tools by the source's current ones (nothing without a source)."""
        if self.source is None:
            return
        offered = await self.source.tools()
        for name in [name for name in self.tools if name not in self._fixed]:
            del self.tools[name]
            self.profiles.pop(name, None)
        for tool in offered:
            if tool.name in self._fixed:
                logger.warning("ignored an added tool that would shadow %s", tool.name)
                continue
            self.tools[tool.name] = register(tool)
            self.profiles[tool.name] = tool.profile

    async def aclose(self) -> None:
        if self.source is not None:
            await self.source.aclose()
