"""Every MCP server of the daemon: the configured (daemon-wide) ones and each session's own.

`McpHub` owns one nursery for the serving life in which every server's connection tasks run
(`run`, readiness as a value). Daemon-wide servers (``[mcp_servers.NAME]``, enabled ones) are
shared by every session and started when first needed; a session's servers
(``session/create {mcpServers}``) are made for that session alone and stopped when it closes
(`close_session`). `aclose` stops them all, concurrently and bounded (daemon shutdown).

`SessionTools` is one session's view: its `tools` are the current tools of every server it
may use, as `McpTool`s — the session's tool table reads them before each turn, after starting
the servers never tried yet (a server that failed is retried on its next call, not at every
turn, so a broken server never slows every turn down; one that failed before it ever listed
a tool, so has none to call, is restarted in the background, within its backoff).
`listing` is ``mcp/list``'s answer; a server's `error` there names the tools it listed that
were left out too (``tool left out: tools[3] ("search").inputSchema.type: Field required``),
since ``mcp/list``'s shape has no other place for them (decision 69). A stdio server that
ended by itself has its last words on stderr there too, after its failure (`last_words`:
``exited with status 3; its last words on stderr: "GITHUB_TOKEN is not set"``), which its
tools' failures, the model's to read, never carry (decision 86).

Nothing here imports the SDK; the first server start does.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Final

import trio
from msgspec import UNSET

from protocol.methods import McpServerEntry
from robotad.agent.tool import Tool
from robotad.mcp.config import McpServerConfig, Scope, ServerSpec, spec_of_config
from robotad.mcp.naming import PREFIX, model_tool_name, model_tool_names, sanitise
from robotad.mcp.server import McpServer
from robotad.mcp.tool import McpTool
from robotad.said_text import one_line_tail
from robotad.storage.spill import SpillStore

__all__ = ["McpHub", "SessionTools"]

log = logging.getLogger("robotad.mcp")

#: The most characters of a server's last words on stderr ``mcp/list`` quotes (the end).
LAST_WORDS_CHARS: Final = 200


class McpHub:
    """The daemon's MCP servers (see the module doc)."""

    def __init__(
        self, configured: Mapping[str, McpServerConfig], *, spill: SpillStore | None = None
    ) -> None:
        self.spill = spill
        self._specs = {
            name: spec_of_config(name, table) for name, table in configured.items() if table.enabled
        }
        self._disabled = sorted(name for name, table in configured.items() if not table.enabled)
        self._daemon: dict[str, McpServer] = {}
        self._sessions: dict[str, dict[str, McpServer]] = {}
        self._session_specs: dict[str, tuple[ServerSpec, ...]] = {}
        self._nursery: trio.Nursery | None = None

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Host the servers until cancelled; ready at once (nothing starts here)."""
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            task_status.started()
            await trio.sleep_forever()

    @property
    def has_daemon_servers(self) -> bool:
        """Whether any enabled server is configured."""
        return bool(self._specs)

    def _new(self, spec: ServerSpec) -> McpServer:
        if self._nursery is None:
            raise RuntimeError("the MCP hub is not running")
        return McpServer(spec, self._nursery)

    def daemon_servers(self) -> list[McpServer]:
        """The enabled configured servers (made, not started, on first ask)."""
        for name, spec in self._specs.items():
            if name not in self._daemon:
                self._daemon[name] = self._new(spec)
        return list(self._daemon.values())

    def session_servers(self, session_id: str) -> list[McpServer]:
        """`session_id`'s own servers (made, not started, on first ask)."""
        own = self._sessions.get(session_id)
        if own is None:
            specs = self._session_specs.get(session_id, ())
            own = {spec.name: self._new(spec) for spec in specs}
            if specs:
                self._sessions[session_id] = own
        return list(own.values())

    def for_session(self, session_id: str, specs: Sequence[ServerSpec]) -> SessionTools:
        """The tool source of one session (being built) with its own `specs`."""
        if specs:
            self._session_specs[session_id] = tuple(specs)
        return SessionTools(self, session_id, bool(specs))

    async def close_session(self, session_id: str) -> None:
        """Stop `session_id`'s own servers and forget them (none: nothing happens)."""
        self._session_specs.pop(session_id, None)
        own = self._sessions.pop(session_id, None)
        if own:
            await _stop_all(list(own.values()))

    async def aclose(self) -> None:
        """Stop every server (daemon shutdown); bounded."""
        servers = list(self._daemon.values())
        for own in self._sessions.values():
            servers.extend(own.values())
        self._sessions.clear()
        await _stop_all(servers)

    async def listing(self, session_id: str | None = None) -> list[McpServerEntry]:
        """``mcp/list``: the daemon's servers, then those of `session_id` (None: of every
        session with servers of its own); servers not running are started first and every
        start is waited for (each bounded by its startup timeout)."""
        servers: list[tuple[Scope, McpServer]] = [("daemon", s) for s in self.daemon_servers()]
        sessions = [session_id] if session_id is not None else list(self._session_specs)
        for session in sessions:
            servers.extend(("session", s) for s in self.session_servers(session))
        async with trio.open_nursery() as nursery:
            for _, server in servers:
                if server.status in ("stopped", "failed") and not server.closed:
                    nursery.start_soon(server.ready)
        entries = [_entry(scope, server) for scope, server in servers]
        entries.extend(
            McpServerEntry(name=name, scope="daemon", status="stopped", tools=[], error="disabled")
            for name in self._disabled
        )
        return entries


class SessionTools:
    """One session's MCP tools (see the module doc); the session's `ToolSource`."""

    def __init__(self, hub: McpHub, session_id: str, has_own: bool) -> None:
        self.hub = hub
        self.session_id = session_id
        self._has_own = has_own

    def servers(self) -> list[McpServer]:
        """The daemon's servers and the session's own."""
        own = self.hub.session_servers(self.session_id) if self._has_own else []
        return self.hub.daemon_servers() + own

    async def tools(self) -> Sequence[Tool]:
        """Every tool of every server this session may use, after starting those never
        tried and waiting for those starting (each bounded by its startup timeout)."""
        servers = self.servers()
        if not servers:
            return []
        # Waited for: a first start (or a first start still under way). A server whose
        # start failed before it ever listed a tool has no tool a call could restart it
        # through: it is started again here, within its backoff, without being waited for,
        # and its tools come for a later turn (an `npx -y` server whose first download
        # outlasted the startup timeout is ready the next time).
        first = [
            s for s in servers if not s.attempted or (s.status == "starting" and not s.failures)
        ]
        if first:
            async with trio.open_nursery() as nursery:
                for server in first:
                    nursery.start_soon(server.ready)
        for server in servers:
            if server.status == "failed" and not server.tools:
                server.start()
        tools: list[Tool] = []
        spill = self.hub.spill.scoped(self.session_id) if self.hub.spill is not None else None
        for server in servers:
            names = model_tool_names(server.name, [info.name for info in server.tools])
            tools.extend(
                McpTool(server, info, spill, name)
                for info, name in zip(server.tools, names, strict=True)
            )
        return tools

    def missing_reason(self, name: str) -> str | None:
        """Why `name` is no tool now when it names a tool of one of this session's servers
        that is not running (``mcp__SERVER__…``): that server's failure, as a call of one of
        its tools would say it; or a tool its server listed but that was left out: why; else
        None."""
        for server in self.servers():
            if name.startswith(f"{PREFIX}{sanitise(server.name)}__") and server.status != "ready":
                return f"MCP server {server.name}: {server.unavailable_reason()}"
            for item in server.left_out:
                if item.name is not None and model_tool_name(server.name, item.name) == name:
                    return f"MCP server {server.name}: {_left_out(item.reason)}"
        return None

    async def aclose(self) -> None:
        """The session closed: its own servers stop (daemon-wide ones keep running)."""
        if self._has_own:
            await self.hub.close_session(self.session_id)


def _entry(scope: Scope, server: McpServer) -> McpServerEntry:
    said = [server.error + last_words(server.error_stderr)] if server.error is not None else []
    said.extend(_left_out(item.reason) for item in server.left_out)
    return McpServerEntry(
        name=server.name,
        scope=scope,
        status=server.status,
        tools=model_tool_names(server.name, [tool.name for tool in server.tools]),
        error="; ".join(said) if said else UNSET,
    )


def last_words(stderr: Sequence[str]) -> str:
    """``; its last words on stderr: "…"`` for a server's last lines on stderr, as
    `one_line_tail` shows them in at most `LAST_WORDS_CHARS` characters; empty when it said
    nothing. Its last lines, not its last line: node ends an uncaught error with a line of
    its version, the error's lines above it."""
    shown = one_line_tail(stderr, LAST_WORDS_CHARS)
    return f'; its last words on stderr: "{shown}"' if shown else ""


def _left_out(reason: str) -> str:
    return f"tool left out: {reason}"


async def _stop_all(servers: list[McpServer]) -> None:
    async with trio.open_nursery() as nursery:
        for server in servers:
            nursery.start_soon(server.stop)
