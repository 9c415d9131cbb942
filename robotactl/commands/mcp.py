"""``robotactl mcp``: the MCP tool servers, their status, tools and last error (``mcp/list``).

Listing starts servers that are not running and waits for each start, so what it shows is
what the next turn gets. ``--session ID`` adds that session's own servers (``session/create
{mcpServers}``); without it, every loaded session's own servers are listed too. With the
global ``--json`` it prints the ``mcp/list`` result as the daemon sent it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import click

from robotactl.cli import ClientOptions, call_daemon
from robotactl.sessions import checked_session_id

if TYPE_CHECKING:
    from protocol.blocking_client import BlockingClient

__all__ = ["mcp", "server_rows"]


@click.command(short_help="List MCP servers: status, tools, last error.")
@click.option(
    "-s",
    "--session",
    "session_id",
    metavar="ID",
    callback=checked_session_id,
    help="Also list this session's own servers.",
)
@click.pass_obj
def mcp(options: ClientOptions, session_id: str | None) -> None:
    """List the MCP tool servers (configured ones and sessions' own): their status, the tools
    they offer (as the model sees them, mcp__SERVER__TOOL) and their last error."""
    params: dict[str, Any] = {} if session_id is None else {"sessionId": session_id}

    def ask(client: BlockingClient) -> Any:
        return client.request("mcp/list", params)

    result = call_daemon(options, ask)
    if options.output.json_mode:
        options.output.json(result)
        return
    servers = result.get("servers", []) if isinstance(result, Mapping) else []
    if not servers:
        options.output.line("no MCP servers (configure [mcp_servers.NAME] in config.toml)")
        return
    options.output.columns(
        ("SERVER", "SCOPE", "STATUS", "TOOLS", "LAST ERROR"), server_rows(servers)
    )


def server_rows(servers: Sequence[Mapping[str, Any]]) -> list[tuple[str, str, str, str, str]]:
    """One row per server: name, scope, status, tool names (comma-separated), last error."""
    rows = []
    for server in servers:
        tools = server.get("tools") or []
        rows.append(
            (
                str(server.get("name", "?")),
                str(server.get("scope", "?")),
                str(server.get("status", "?")),
                ", ".join(str(tool) for tool in tools) or "-",
                str(server.get("error") or "-"),
            )
        )
    return rows
