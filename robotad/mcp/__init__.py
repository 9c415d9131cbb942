"""MCP tool servers behind robotad's permission gate (PROTOCOL.md §10.5).

The shapes and names every layer may use without loading the SDK: a server's configuration
and spec (`robotad.mcp.config`), and the ``mcp__SERVER__TOOL`` naming (`robotad.mcp.naming`).
The daemon runs servers through `robotad.mcp.hub.McpHub`; the official ``mcp`` SDK is imported
only when a server first starts (`robotad.mcp.connection`), so a daemon without MCP servers
never loads it.
"""

from __future__ import annotations

from robotad.mcp.config import McpServerConfig, ServerSpec
from robotad.mcp.naming import model_tool_name, rule_covers

__all__ = ["McpServerConfig", "ServerSpec", "model_tool_name", "rule_covers"]
