"""One MCP server under supervision: started when first needed, restarted when it died.

`McpServer` runs each connection attempt as its own task in the hub's nursery (an HTTP server
dying tears down its whole client block; here it ends that task only). Its life:

``stopped`` → `start` → ``starting`` → ``ready`` (tools listed) → the server exits, crashes
or fails → ``failed`` (`error` says why) → the next call (or turn, or ``mcp/list``) starts
it again. Consecutive failures space the attempts out: the first retry is immediate, later
ones wait `backoff(n)` — 0.5 s doubling up to 30 s — and a call inside that wait fails at
once saying when the next attempt is allowed (never a turn that hangs on a broken server).
`stop` ends it for good (``stopped``), shielded and bounded. A server whose name robotad
refuses (a session stored before a name that long was refused, decision 68) never starts: it
fails saying why, so no tool of it is ever offered under a name its rules would not cover.

A stdio server that ended by itself leaves its last lines on stderr beside its failure
(`error_stderr`, of that run only): ``mcp/list`` shows them to the person, and a call's
`ServerUnavailable` never carries them, since what a server prints may hold a secret and a
tool result goes to the model's provider (decision 86).

A call runs on the caller's task over the shared SDK session, so an abort (a cancelled scope)
cancels that call alone and the SDK tells the server (``notifications/cancelled``). Every
failure is `ServerUnavailable` with a reason naming what went wrong; the SDK is imported only
when a server first starts.

A tool of a listing the SDK would refuse (an ``inputSchema`` without ``type``) is left out,
the server's other tools offered: `left_out` says which and why, ``mcp/list`` shows it, and
the log warns of it once, not at every re-listing (decision 69).
"""

from __future__ import annotations

import logging
import math
from typing import TYPE_CHECKING, Any, Final, Literal

import trio
from msgspec import Struct

from robotad.log import fields
from robotad.mcp.config import ServerSpec, name_problem

if TYPE_CHECKING:
    from robotad.mcp.connection import Connection
    from robotad.mcp.screening import LeftOut

__all__ = ["McpServer", "ServerStatus", "ServerUnavailable", "ToolInfo", "backoff"]

log = logging.getLogger("robotad.mcp")

ServerStatus = Literal["starting", "ready", "failed", "stopped"]
_MAX_BACKOFF: Final = 30.0
#: How long `stop` waits for a server to wind down before abandoning the wait.
_STOP_TIMEOUT: Final = 8.0


class ServerUnavailable(Exception):
    """A call could not be made or answered; `reason` is safe to show."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class ToolInfo(Struct, frozen=True):
    """One tool as the server listed it (SDK-free)."""

    name: str
    description: str
    input_schema: dict[str, Any]


def backoff(failures: int) -> float:
    """Seconds before the next start after `failures` consecutive failures."""
    if failures <= 1:
        return 0.0
    return float(min(0.5 * 2 ** (failures - 2), _MAX_BACKOFF))


class McpServer:
    """One server (see the module doc). `nursery` runs its connection tasks and must outlive
    it (the hub's)."""

    def __init__(self, spec: ServerSpec, nursery: trio.Nursery) -> None:
        self.spec = spec
        self.status: ServerStatus = "stopped"
        #: The last failure, kept after a successful restart (``robotactl mcp`` shows it).
        self.error: str | None = None
        #: The last lines on stderr of the stdio server whose ending `error` is, from that
        #: run; empty when it said nothing or `error` is no such ending. Never for the model.
        self.error_stderr: tuple[str, ...] = ()
        self.tools: list[ToolInfo] = []
        #: The tools of its last listing that were left out, each with why.
        self.left_out: list[LeftOut] = []
        #: Whether a start was ever attempted (turns start only servers never tried).
        self.attempted = False
        self._nursery = nursery
        self._connection: Connection | None = None
        self._settled = trio.Event()
        self._settled.set()
        self._failures = 0
        self._retry_at = -math.inf
        self._scope: trio.CancelScope | None = None
        self._closed = False
        self._task_done = trio.Event()
        self._task_done.set()
        self._refresh = trio.Event()

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def closed(self) -> bool:
        """Stopped for good (its session closed, or the daemon stops)."""
        return self._closed

    @property
    def failures(self) -> int:
        """Attempts that failed in a row (0 once it is ready)."""
        return self._failures

    @property
    def pid(self) -> int | None:
        """The stdio server's process id while it runs (for diagnostics and tests)."""
        return self._connection.pid if self._connection is not None else None

    # -- starting ----------------------------------------------------------------------------

    def start(self) -> bool:
        """Begin a connection attempt unless one runs, the server is ready, stopped for good
        or inside its backoff. Returns whether an attempt is (now) under way."""
        if self.status == "starting":
            return True
        if self._closed or self.status == "ready" or trio.current_time() < self._retry_at:
            return False
        self.attempted = True
        self.status = "starting"
        self._settled = trio.Event()
        self._task_done = trio.Event()
        self._nursery.start_soon(self._supervise, name=f"mcp server {self.name}")
        return True

    async def ready(self) -> None:
        """Start when allowed (see `start`) and wait until the attempt has settled."""
        self.start()
        await self._settled.wait()

    # -- calling -----------------------------------------------------------------------------

    async def call(self, tool: str, arguments: dict[str, Any]) -> Any:
        """``tools/call`` of `tool` (the server's own name for it); the SDK's result. Raises
        `ServerUnavailable`; cancellation cancels this call only. A call an HTTP server
        refused unrun, having forgotten the session (it restarted), is made once more, on a
        new connection (decision 87)."""
        from robotad.mcp.connection import ServerFailed

        try:
            try:
                return await self._call_once(tool, arguments)
            except ServerFailed as exc:
                if not exc.unrun:
                    raise
                log.info(
                    "mcp server forgot the session; calling %s again on a new one: %s",
                    tool,
                    exc.reason,
                    extra=fields(mcp_server=self.name),
                )
                return await self._call_once(tool, arguments)
        except ServerFailed as exc:
            raise ServerUnavailable(exc.reason) from None

    async def _call_once(self, tool: str, arguments: dict[str, Any]) -> Any:
        """One attempt of `call`, starting the server first when it is not ready; raises
        `ServerFailed`."""
        from robotad.mcp.connection import ServerFailed

        if self._connection is not None and self._connection.lost:
            # It died and its task has yet to record that: let it, then start it again.
            with trio.move_on_after(_STOP_TIMEOUT):
                await self._task_done.wait()
        if self.status != "ready":
            await self.ready()
        connection = self._connection
        if connection is None:
            raise ServerFailed(self.unavailable_reason())
        return await connection.call(tool, arguments, self.spec.tool_timeout)

    def unavailable_reason(self) -> str:
        """Why the server cannot take a call now, with when it is next tried."""
        if self._closed:
            return "stopped"
        reason = self.error or "not running"
        wait = self._retry_at - trio.current_time()
        if wait > 0:
            return f"{reason} (next start attempt in {math.ceil(wait)} s)"
        return reason

    # -- the connection task -----------------------------------------------------------------

    async def _supervise(self) -> None:
        from robotad.mcp.connection import ServerFailed, connect, describe_error

        failure: str | None = None
        stderr: tuple[str, ...] = ()
        try:
            with trio.CancelScope() as scope:
                self._scope = scope
                if self._closed:
                    scope.cancel()
                try:
                    if (problem := name_problem(self.name)) is not None:
                        # Only a session stored before the name was refused gets here.
                        raise ServerFailed(f"not started: {problem}")
                    async with connect(self.spec, self._tools_changed) as connection:
                        self._became_ready(connection)
                        async with trio.open_nursery() as nursery:
                            nursery.start_soon(self._refresh_tools, connection)
                            await connection.wait_closed()
                            nursery.cancel_scope.cancel()
                    failure = connection.failure or "the connection to the server closed"
                    stderr = connection.stderr_tail
                except ServerFailed as exc:
                    failure, stderr = exc.reason, exc.stderr
                except Exception as exc:
                    failure = describe_error(exc)
                except BaseExceptionGroup as group:
                    # Nothing but cancellation may leave this task: a failure bundled with a
                    # Cancelled (an SDK task group torn down mid-cancel) is still a failure.
                    _, rest = group.split(trio.Cancelled)
                    if rest is None:
                        raise
                    failure = describe_error(rest)
        finally:
            self._connection = None
            self._scope = None
            self._ended(failure, stderr)
            self._task_done.set()

    def _became_ready(self, connection: Connection) -> None:
        self._connection = connection
        self._listed(connection)
        self.status = "ready"
        self._failures = 0
        self._retry_at = -math.inf
        self._settled.set()
        log.info(
            "mcp server ready",
            extra=fields(mcp_server=self.name, tools=len(self.tools), pid=connection.pid),
        )

    def _ended(self, failure: str | None, stderr: tuple[str, ...]) -> None:
        if self._closed or failure is None:
            self.status = "stopped"
        else:
            # The same failure again (a server retried in the background) is noted, not
            # warned of anew: a broken server must not fill the log every 30 s.
            again = self._failures > 0 and failure == self.error
            self.status = "failed"
            self.error = failure
            self.error_stderr = stderr
            self._failures += 1
            self._retry_at = trio.current_time() + backoff(self._failures)
            log.log(
                logging.INFO if again else logging.WARNING,
                "mcp server failed: %s",
                failure,
                extra=fields(mcp_server=self.name, failures=self._failures),
            )
        self._settled.set()

    def _tools_changed(self) -> None:
        """The server announced a new tool list (``notifications/tools/list_changed``)."""
        self._refresh.set()

    async def _refresh_tools(self, connection: Connection) -> None:
        """Re-read the tool list on every ``notifications/tools/list_changed``."""
        from robotad.mcp.connection import describe_error

        while True:
            await self._refresh.wait()
            self._refresh = trio.Event()
            try:
                await connection.list_tools()
            except Exception as exc:
                log.warning(
                    "re-reading the tool list failed: %s",
                    describe_error(exc),
                    extra=fields(mcp_server=self.name),
                )
                continue
            self._listed(connection)

    def _listed(self, connection: Connection) -> None:
        """Take `connection`'s tool list; warn of each tool left out that was not before."""
        self.tools = [_tool_info(tool) for tool in connection.tools]
        for item in connection.left_out:
            if item not in self.left_out:
                log.warning(
                    "mcp server tool left out: %s",
                    item.reason,
                    extra=fields(mcp_server=self.name),
                )
        self.left_out = list(connection.left_out)

    # -- stopping ----------------------------------------------------------------------------

    async def stop(self) -> None:
        """Stop for good: end the connection (a stdio server's process group too) and wait,
        bounded, for it to wind down. Idempotent."""
        self._closed = True
        if self._scope is not None:
            self._scope.cancel()
        with trio.move_on_after(_STOP_TIMEOUT):
            await self._task_done.wait()
        self.status = "stopped"
        self._settled.set()


def _tool_info(tool: Any) -> ToolInfo:
    return ToolInfo(
        name=tool.name,
        description=tool.description or "",
        input_schema=dict(tool.input_schema or {"type": "object"}),
    )
