"""A tool as a session registers it: the tool itself, with its schema read once.

Every provider call of a turn shows the model each tool's JSON Schema, and every save stores
them; a `TypedTool` builds that schema from its argument Struct each time it is asked, which
costs more than the rest of a short turn. `RegisteredTool` asks its tool once, on first use,
and keeps the answer: a registered tool's schema is fixed for the life of the session (the model
and the stored record both see one stable schema). Everything else — name, description,
profile, argument decoding, the body — is the tool's own, read through on every use.
"""

from __future__ import annotations

from typing import Any

from robotad.agent.provider import ToolSchema
from robotad.agent.tool import Tool, ToolContext, ToolProfile, ToolResult

__all__ = ["RegisteredTool", "register"]


class RegisteredTool:
    """`tool` with its schema cached (see the module doc); satisfies the `Tool` protocol."""

    def __init__(self, tool: Tool) -> None:
        self.tool = tool
        self._schema: ToolSchema | None = None

    @property
    def name(self) -> str:
        return self.tool.name

    @property
    def description(self) -> str:
        return self.tool.description

    @property
    def profile(self) -> ToolProfile:
        return self.tool.profile

    @property
    def schema(self) -> ToolSchema:
        """The tool's schema as it was when first asked for."""
        if self._schema is None:
            self._schema = self.tool.schema
        return self._schema

    def decode_arguments(self, arguments: dict[str, Any]) -> Any:
        return self.tool.decode_arguments(arguments)

    async def run(self, arguments: Any, ctx: ToolContext) -> ToolResult:
        return await self.tool.run(arguments, ctx)


def register(tool: Tool) -> RegisteredTool:
    """`tool` ready to be held by a session (a tool registered already is kept as it is)."""
    return tool if isinstance(tool, RegisteredTool) else RegisteredTool(tool)
