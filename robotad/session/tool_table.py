"""A session's tools: its fixed ones, plus those a `ToolSource` offers turn by turn.

The built-in tools are registered once. A `ToolSource` (the daemon's MCP servers) offers
further tools that can change between turns — a server started, restarted or announcing a new
tool list — so `refresh`, awaited at the start of each turn's loop, replaces the added tools
with the source's current ones. `tools` and `profiles` are the very dicts the turn loop and the
permission enforcer read, so a refreshed tool is offered to the model and judged by its own
profile from that turn on. A source's tool that would shadow a fixed tool is ignored.

`aclose` releases the source (a session's own servers stop with it).
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


class ToolTable:
    """The tools and profiles of one session (see the module doc)."""

    def __init__(self, tools: Sequence[Tool], source: ToolSource | None = None) -> None:
        self.tools: dict[str, Tool] = {tool.name: register(tool) for tool in tools}
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
