"""An MCP server's tool on robotad's tool port, so the session gate treats it like Read or Bash.

`McpTool` is named ``mcp__SERVER__TOOL`` (`robotad.mcp.naming`), shows the model the
server's input schema, and has the profile of its server's `risk` (default ``execute``: a
person is asked in ``default`` mode) with the names rules cover it by besides its own
(``mcp__SERVER`` and its full name, `naming.rule_names`). Permission rules, modes, hooks, the
classifier, approvals and the spill threshold therefore apply unchanged — the session's gate
decides before `run` is ever called.

The schema is the server's, with one repair: an object schema without ``properties`` gets an
empty one (`offered_schema`), since OpenAI refuses the request that offers it (decision 66).

Arguments are passed through as the model gave them (an object); checking them against the
schema is the server's job, and it answers a bad call with ``isError``. `run` never raises for
a server problem: an unavailable server, a timeout or a crash is a failed result naming the
server (`robotad.mcp.results`). Cancellation (an abort) propagates and cancels the call.
"""

from __future__ import annotations

from typing import Any

from robotad.agent.provider import ToolSchema
from robotad.agent.tool import ArgumentError, ToolContext, ToolProfile, ToolResult
from robotad.mcp.naming import rule_names
from robotad.mcp.results import failed_result, tool_result
from robotad.mcp.server import McpServer, ServerUnavailable, ToolInfo
from robotad.storage.spill import SpillStore

__all__ = ["McpTool", "offered_schema"]


class McpTool:
    """One tool of one server; satisfies the `Tool` protocol."""

    def __init__(
        self, server: McpServer, info: ToolInfo, spill: SpillStore | None, name: str
    ) -> None:
        self.server = server
        self.info = info
        self.name = name  # `naming.model_tool_names` of the server's tools
        self.description = info.description or f"{info.name} (MCP server {server.name})"
        self.profile = ToolProfile(
            risk=server.spec.risk, rule_names=rule_names(server.name, info.name)
        )
        self.schema = ToolSchema(self.name, self.description, offered_schema(info.input_schema))
        self._spill = spill

    def decode_arguments(self, arguments: dict[str, Any]) -> dict[str, Any]:
        if not isinstance(arguments, dict):
            raise ArgumentError(f"the arguments of {self.name} must be an object")
        return arguments

    async def run(self, arguments: dict[str, Any], ctx: ToolContext) -> ToolResult:
        server = self.server.name
        try:
            result = await self.server.call(self.info.name, arguments)
        except ServerUnavailable as exc:
            return failed_result(server, self.info.name, exc.reason)
        return await tool_result(server, self.info.name, result, self._spill)


def offered_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """`schema` as the model is offered it: an object schema without `properties` gets an
    empty one, the rest as the server listed it. JSON Schema needs no `properties`, and
    ``{"type": "object"}`` is what the official Go SDK lists for a tool without arguments,
    but OpenAI refuses a function whose parameters lack them ("object schema missing
    properties"), and with it the whole request: every turn offered such a tool failed."""
    if schema.get("type") == "object" and "properties" not in schema:
        return {**schema, "properties": {}}
    return schema
