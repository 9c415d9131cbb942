"""``robotactl mcp``: the MCP tool servers, their status, tools and last error (``mcp/list``).

Listing starts servers that are not running and waits for each start, so what it shows is
what the next turn gets. The table names a server's tools without their ``mcp__SERVER__``
prefix, as many as fit a column of `TOOLS_WIDTH` characters; ``--tools`` lists every one
under its server as the model and permission rules name it. ``--session ID`` adds that
session's own servers (``session/create {mcpServers}``); without it, every loaded session's
own servers are listed too. With the global ``--json`` it prints the ``mcp/list`` result as
the daemon sent it. Names, tools and errors are a server's words: they are made visible
(`robotactl.terminal_text`), in the table by `Output.columns`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import click

from robotactl.cli import ClientOptions, call_daemon
from robotactl.sessions import checked_session_id, resolve_session

if TYPE_CHECKING:
    from protocol.blocking_client import BlockingClient

__all__ = ["TOOLS_WIDTH", "mcp", "server_rows"]

#: The widest the table's TOOLS column gets (the rest is counted: ``… (+9 more)``).
TOOLS_WIDTH = 48


@click.command(short_help="List MCP servers: status, tools, last error.")
@click.option(
    "-s",
    "--session",
    "session_id",
    metavar="ID",
    callback=checked_session_id,
    help="Also list this session's own servers (its id, or a unique prefix of it).",
)
@click.option(
    "--tools",
    "list_tools",
    is_flag=True,
    help="List every tool under its server, as the model names it (mcp__SERVER__TOOL).",
)
@click.pass_obj
def mcp(options: ClientOptions, session_id: str | None, list_tools: bool) -> None:
    """List the MCP tool servers (configured ones and sessions' own): their status, the tools
    they offer (as the model sees them, mcp__SERVER__TOOL) and their last error. A server not
    running is started first.

    With --json, prints the mcp/list result.
    """

    def ask(client: BlockingClient) -> Any:
        params: dict[str, Any] = {}
        if session_id is not None:
            params["sessionId"] = resolve_session(client, session_id)
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
    if list_tools:
        from robotactl.terminal_text import visible

        for server in servers:
            tools = server.get("tools") or []
            options.output.line("")
            count = f"{len(tools)} tool{'' if len(tools) == 1 else 's'}"
            options.output.line(f"{visible(str(server.get('name', '?')))} ({count}):")
            for tool in tools:
                options.output.line(f"  {visible(str(tool))}")


def server_rows(servers: Sequence[Mapping[str, Any]]) -> list[tuple[str, str, str, str, str]]:
    """One row per server: name, scope, status, its tools (`tools_cell`), last error."""
    rows = []
    for server in servers:
        name = str(server.get("name", "?"))
        tools = [str(tool) for tool in server.get("tools") or []]
        rows.append(
            (
                name,
                str(server.get("scope", "?")),
                str(server.get("status", "?")),
                tools_cell(name, tools),
                str(server.get("error") or "-"),
            )
        )
    return rows


def tools_cell(server: str, tools: Sequence[str]) -> str:
    """``echo, add, … (+9 more)``: the tools' names without ``mcp__SERVER__``, as many as fit
    `TOOLS_WIDTH` characters with the count of the rest; ``-`` for none."""
    prefix = f"mcp__{server}__"
    names = [tool.removeprefix(prefix) for tool in tools]
    if not names:
        return "-"
    if len(", ".join(names)) <= TOOLS_WIDTH:
        return ", ".join(names)
    shown: list[str] = []
    for index, name in enumerate(names):
        rest = len(names) - index - 1
        more = f", … (+{rest} more)" if rest else ""
        if shown and len(", ".join([*shown, name]) + more) > TOOLS_WIDTH:
            return ", ".join(shown) + f", … (+{len(names) - len(shown)} more)"
        shown.append(name)
    return ", ".join(shown)
