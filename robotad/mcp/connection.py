"""One live connection to an MCP server through the official SDK (imported only here and in
`robotad.mcp.screening`, which this imports).

`connect(spec, on_tools_changed)` opens the transport — robotad's own stdio channel
(`robotad.mcp.stdio`) or the SDK's streamable-HTTP client — runs the SDK's `ClientSession`
over it, performs the legacy ``initialize`` handshake (every server speaks it, stdio servers
included) and lists the tools, all within the server's startup timeout, then yields a
`Connection`. The caller's body runs inside; leaving it closes the session and the transport
(a stdio server's process group is stopped).

Failures are translated here, once: `ServerFailed` with a reason that names what went wrong
(``did not answer within 10000 ms``, ``exited with status 1``, ``wrote something other than
JSON-RPC on stdout…``, ``HTTP 401 Unauthorized…``), never an exception group of SDK internals.
The SDK answers an HTTP server's refusal with a stand-in ("Server returned an error
response"); robotad's HTTP client notes the status it saw (`_HttpRefusals`) so the reason
names it, and for 401 and 403 says what to set. A server's own error answer is its call's
failure, quoting it, even under the code the SDK also uses for a closed connection (-32000,
JSON-RPC's first server error): only a connection that did end is taken down (decision 65).
So under the SDK's code for its own timeout (-32001): only the SDK's words for that are a
timeout (decision 69). An HTTP server that no longer knows the connection's session (it
restarted) ends the connection, and the call it refused is marked `unrun` so that it can be
made again on a new one (decision 87).

An answer the SDK refuses is located (`robotad.mcp.screening`): a call's says which member and
what was wrong; a tool the SDK would refuse a listing for is left out of it, named with why
(`Connection.left_out`), and the server's other tools are offered (decision 69).

An HTTP server's answers are held to `robotad.http_bounds` (decision 39): a JSON answer, an
event or a line past 16 MiB, or a compressed answer, fails the one call it answered, saying
what was too large; the connection, and every other call on it, carries on. The SDK reads
through those bounds on its own (a JSON answer whole; an event up to 1 MiB unless told, so
it is told the same 16 MiB: a result that fits a stdio server's answer must not fail over
HTTP). And one request's POST times out, fails or is abandoned alone (decision 41,
`robotad.mcp.http_client`): a call that outlived its tool timeout no longer takes the
connection down minutes later, nor holds up the calls after it.

A stdio server that ended by itself leaves its last lines on stderr beside the failure
(`ServerFailed.stderr`, `Connection.stderr_tail`), for the person's listing only (decision 86).

Its size is one concept: a server's connection and every way it fails, each translated once.
"""

from __future__ import annotations

import logging
import math
from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any, Final

import httpx2
import mcp_types as types
import trio
from mcp.client.session import ClientSession
from mcp.shared.exceptions import MCPError
from pydantic import ValidationError

from robotad.http_bounds import MAX_MESSAGE_BYTES, bounded
from robotad.log import fields
from robotad.mcp.config import ServerSpec
from robotad.mcp.screening import LeftOut, ScreeningDispatcher, describe_invalid
from robotad.mcp.stdio import StdioChannel, open_stdio

__all__ = ["Connection", "ServerFailed", "connect", "describe_error"]

log = logging.getLogger("robotad.mcp")

#: What robotad calls itself to a server.
_CLIENT_INFO: Final = types.Implementation(name="robotad", version="1")
#: Pages of a paginated tools/list followed before giving up (a server looping its cursor).
_MAX_TOOL_PAGES: Final = 50


class ServerFailed(Exception):
    """The server could not be used; `reason` is safe to show (no header or env value).
    `unrun`: the server refused the call unrun, having forgotten the connection's session
    (`_HttpRefusals.forgot_session`), so it may be made again on a new one. `stderr`: when a
    stdio server's ending is the reason, its last lines on stderr (`StdioChannel.stderr_tail`),
    the server's words, not `reason`'s: they may hold anything it printed (decision 86)."""

    def __init__(self, reason: str, *, unrun: bool = False, stderr: tuple[str, ...] = ()) -> None:
        super().__init__(reason)
        self.reason = reason
        self.unrun = unrun
        self.stderr = stderr


#: The SDK's message for an HTTP status it does not pass on (mcp 2.3's streamable-HTTP client).
_STAND_IN: Final = "Server returned an error response"
#: What the SDK says, under ``CONNECTION_CLOSED``, when its connection ended (mcp 2.3's
#: dispatcher), and how its streamable-HTTP client starts what it says, under the same code,
#: of one request whose answer can no longer come (its event stream broke or ended, a 202
#: answered it).
_SDK_CLOSED: Final = "Connection closed"
_SDK_ABANDONED: Final = ("SSE stream ", "server answered a request with 202 Accepted")
#: What the SDK says, under ``REQUEST_TIMEOUT``, of a call it stopped waiting for (mcp 2.3's
#: dispatcher); a server may answer with that code too.
_SDK_TIMED_OUT: Final = "Request 'tools/call' timed out"
#: What the SDK says, under ``METHOD_NOT_FOUND``, of a 404 before a session exists.
_SDK_NOT_FOUND: Final = "Not Found"
#: The header naming the session of a streamable-HTTP connection.
_SESSION_HEADER: Final = "mcp-session-id"


class _AnswerRefused(httpx2.SSEError, httpx2.StreamError):
    """An answer a bound of `robotad.http_bounds` refused. Both an event stream's error and
    a stream error, so the SDK fails the one request whose answer it was reading, however it
    read it (a JSON body, an event stream), quoting this; anything else would tear down the
    whole transport, every call on it."""


class _HttpRefusals:
    """What an HTTP server's answers were refused for. The last refusal (status 400 and up)
    it answered a POST with: the SDK's stand-in follows the refused POST of its own request.
    Its GET event stream (refused 405 by many servers, and retried) and its DELETE at close
    are not what a call is told. And the reasons `robotad.http_bounds` refused an answer for
    (`refuse`), which the SDK quotes in the failure of the call it answered."""

    def __init__(self) -> None:
        self.last: tuple[int, str] | None = None
        self.bounds: set[str] = set()
        #: The refusal (404, or 400) of a POST that named a session: the server may have
        #: forgotten that session (it restarted).
        self.session_refused: tuple[int, str] | None = None

    async def on_response(self, response: Any) -> None:
        if response.request.method != "POST":
            return
        if response.status_code < 400:
            self.session_refused = None  # the server knows the session
            return
        self.last = (response.status_code, response.reason_phrase)
        if response.status_code in (400, 404) and _SESSION_HEADER in response.request.headers:
            self.session_refused = self.last

    def forgot_session(self, exc: MCPError) -> str | None:
        """Why the connection is over when `exc` says the server no longer knows its
        session: a 404 answered a request naming it, as the MCP specification has a server
        say so (the client must then start a new session), or a 400 whose error speaks of a
        session, as servers made from the TypeScript SDK's examples (server-everything)
        answer. The server ran no such request. None for any other failure."""
        if self.session_refused is None:
            return None
        status, phrase = self.session_refused
        if status == 400 and "session" not in exc.message.lower():
            return None
        said = f"HTTP {status} {phrase}".rstrip()
        return f"the server no longer knows robotad's session ({said}: {exc.message})"

    def refuse(self, reason: str) -> Exception:
        self.bounds.add(reason)
        return _AnswerRefused(reason)

    def explain(self, exc: MCPError) -> str | None:
        """What the refusal behind `exc` was, when `exc` is the SDK's stand-in for one or
        quotes a refused answer."""
        for reason in self.bounds:
            if reason in exc.message:
                return reason
        if self.last is None:
            return None
        status, phrase = self.last
        not_found = status == 404 and exc.message == _SDK_NOT_FOUND
        if exc.message != _STAND_IN and not not_found:
            return None
        said = f"HTTP {status} {phrase}".rstrip()
        if status == 401:
            return f"{said}: the server wants credentials (set its headers, e.g. Authorization)"
        if status == 403:
            return f"{said}: the server refused these credentials (check its headers)"
        if status == 404:
            return f"the server answered {said}: nothing serves MCP at its url (check the path)"
        return f"the server answered {said}"


class Connection:
    """A ready server: its SDK session, its tools (and those left out), and (stdio) its
    channel."""

    def __init__(
        self,
        session: ClientSession,
        channel: StdioChannel | None,
        http: _HttpRefusals | None = None,
        *,
        screen: ScreeningDispatcher | None = None,
    ) -> None:
        self.session = session
        self.channel = channel
        self.http = http
        self.tools: list[types.Tool] = []
        #: The tools of the last listing the SDK would have refused it for, and why.
        self.left_out: list[LeftOut] = []
        # The session's dispatcher, screening its tool lists (None: tools are not screened).
        self._screen = screen
        if screen is not None:
            screen.version = lambda: session.protocol_version
        # Set when the server's side ended: a stdio server's channel closed, or a call found
        # the connection closed (an HTTP server that went away, or forgot its session).
        self._lost = channel.closed if channel is not None else trio.Event()
        #: Why an HTTP connection ended, when a call found out (None: it did not, or stdio).
        self._http_failure: str | None = None

    @property
    def pid(self) -> int | None:
        return self.channel.pid if self.channel is not None else None

    @property
    def failure(self) -> str | None:
        return self.channel.failure if self.channel is not None else self._http_failure

    @property
    def stderr_tail(self) -> tuple[str, ...]:
        """A stdio server that ended by itself: its last lines on stderr (see `ServerFailed`),
        whole once the connection's context is left."""
        return self.channel.stderr_tail if self.channel is not None else ()

    @property
    def lost(self) -> bool:
        """Whether the server's side has ended (see `wait_closed`)."""
        return self._lost.is_set()

    async def wait_closed(self) -> None:
        """Until the server's side ended: a stdio server exited or closed its stdout, or a
        call found the connection closed."""
        await self._lost.wait()

    async def list_tools(self) -> list[types.Tool]:
        """Every usable tool of the server (all pages), kept in `tools` too; those left out
        are in `left_out`."""
        tools: list[types.Tool] = []
        cursor: str | None = None
        if self._screen is not None:
            self._screen.left_out = []
        for _ in range(_MAX_TOOL_PAGES):
            params = types.PaginatedRequestParams(cursor=cursor) if cursor else None
            page = await self.session.list_tools(params=params)
            tools.extend(page.tools)
            cursor = page.next_cursor
            if not cursor:
                break
        self.tools = tools
        self.left_out = self._screen.left_out if self._screen is not None else []
        return tools

    async def call(self, name: str, arguments: dict[str, Any], timeout: float) -> Any:  # noqa: ASYNC109
        """One ``tools/call``; raises `ServerFailed` for a protocol error, a timeout or a
        connection that ended. Cancellation sends ``notifications/cancelled`` (the SDK).

        `timeout` counts from this call: the SDK starts its own clock only once its transport
        took the request, so a transport still busy with an earlier message held the call
        without bound (decision 41). An HTTP server that forgot the session refused the call
        unrun: the connection is over, and the failure says the call may be made again
        (decision 87)."""
        with trio.move_on_after(timeout):
            try:
                return await self.session.call_tool(name, arguments, read_timeout_seconds=timeout)
            except MCPError as exc:
                if self.http is not None and (forgot := self.http.forgot_session(exc)):
                    self._http_failure = self._http_failure or forgot
                    self._lost.set()
                    raise ServerFailed(forgot, unrun=True) from None
                raise ServerFailed(self._reason(exc, timeout)) from None
            except Exception as exc:  # a result the SDK refuses (shape, schema, input request)
                raise ServerFailed(f"unusable answer: {describe_error(exc)}") from None
        raise ServerFailed(_timed_out(timeout))

    def _reason(self, exc: MCPError, timeout: float) -> str:
        if self.http is not None and (refusal := self.http.explain(exc)) is not None:
            return refusal
        if exc.code == types.REQUEST_TIMEOUT and exc.message == _SDK_TIMED_OUT:
            return _timed_out(timeout)
        if exc.code == types.CONNECTION_CLOSED and self._ended(exc):
            self._lost.set()
            return self.failure or "the connection to the server closed"
        if exc.code == types.CONNECTION_CLOSED and exc.message.startswith(_SDK_ABANDONED):
            return f"no answer came: {exc.message}"
        return f"error {exc.code}: {exc.message}"

    def _ended(self, exc: MCPError) -> bool:
        """Whether `exc`, of the SDK's code for a closed connection, says the connection
        ended: the SDK's words for that, or a stdio channel closed. The code is also
        JSON-RPC's first implementation-defined server error, which servers answer a call
        with (``-32000: the index is offline``), and the SDK's streamable-HTTP client fails a
        request whose answer can no longer come with it: either fails its call alone, and
        the server, ready, serves on (decision 65)."""
        if exc.message == _SDK_CLOSED:
            return True
        return self.channel is not None and self.channel.closed.is_set()


@asynccontextmanager
async def connect(
    spec: ServerSpec, on_tools_changed: Callable[[], None]
) -> AsyncIterator[Connection]:
    """A ready `Connection` to `spec`'s server (see the module doc); raises `ServerFailed`."""

    async def on_message(message: Any) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            on_tools_changed()
        elif isinstance(message, Exception):
            log.warning(
                "mcp transport error: %s",
                describe_error(message),
                extra=fields(mcp_server=spec.name),
            )

    startup = trio.CancelScope(deadline=trio.current_time() + spec.startup_timeout)
    connection: Connection | None = None
    channel: StdioChannel | None = None
    http: _HttpRefusals | None = None
    try:
        with startup:
            async with AsyncExitStack() as stack:
                if spec.url is None:
                    channel = await stack.enter_async_context(open_stdio(spec))
                    streams: tuple[Any, Any] = (channel.read_stream, channel.write_stream)
                else:
                    http = _HttpRefusals()
                    streams = await stack.enter_async_context(_http_streams(spec, stack, http))
                screen = ScreeningDispatcher(*streams)
                session = await stack.enter_async_context(
                    ClientSession(
                        client_info=_CLIENT_INFO, message_handler=on_message, dispatcher=screen
                    )
                )
                pending = Connection(session, channel, http, screen=screen)
                await _handshake(pending)
                startup.deadline = math.inf
                connection = pending
                yield connection
    except ServerFailed as exc:
        if channel is not None and channel.failure == exc.reason:
            exc.stderr = channel.stderr_tail  # its stderr was read to the end on leaving
        raise
    except OSError as exc:
        what = f" {spec.command}" if spec.url is None and spec.command else ""
        raise ServerFailed(f"cannot start{what}: {exc.strerror or exc}") from None
    except Exception as exc:
        if connection is None and startup.cancelled_caught:
            raise ServerFailed(_startup_timeout(spec)) from None
        if channel is not None and channel.failure is not None:
            raise ServerFailed(channel.failure, stderr=channel.stderr_tail) from None
        raise ServerFailed(describe_error(exc)) from None
    if connection is None and startup.cancelled_caught:
        raise ServerFailed(_startup_timeout(spec))


async def _handshake(pending: Connection) -> None:
    try:
        await pending.session.initialize()
        if pending.channel is not None:
            pending.channel.initialized = True
        await pending.list_tools()
        if pending.channel is not None:
            pending.channel.started()
    except Exception as exc:
        # A server that died or wrote garbage mid-handshake surfaces in the SDK as a closed
        # connection or a closed stream, whichever it met first: the channel knows why.
        if pending.failure is not None:
            raise ServerFailed(pending.failure) from None
        if isinstance(exc, MCPError):
            refusal = pending.http.explain(exc) if pending.http is not None else None
            if refusal is not None:
                raise ServerFailed(refusal) from None
            raise ServerFailed(f"handshake failed: error {exc.code}: {exc.message}") from None
        raise


@asynccontextmanager
async def _http_streams(
    spec: ServerSpec, stack: AsyncExitStack, refusals: _HttpRefusals
) -> AsyncIterator[tuple[Any, Any]]:
    from mcp.client.streamable_http import streamable_http_client

    from robotad.mcp.http_client import McpHttpClient

    assert spec.url is not None
    background = await stack.enter_async_context(trio.open_nursery())
    stack.callback(background.cancel_scope.cancel)
    client = McpHttpClient(spec, refusals.refuse, background)
    client.event_hooks["response"].append(refusals.on_response)
    client = await stack.enter_async_context(bounded(client, refusals.refuse))
    async with streamable_http_client(
        spec.url, http_client=client, max_sse_event_size=MAX_MESSAGE_BYTES
    ) as streams:
        yield streams[0], streams[1]


def _timed_out(timeout: float) -> str:
    return f"did not answer within {round(timeout * 1000)} ms"


def _startup_timeout(spec: ServerSpec) -> str:
    return f"did not finish starting within {spec.startup_timeout_ms} ms"


def describe_error(exc: BaseException) -> str:
    """One line for an error that may be an exception group: its first real leaf."""
    while isinstance(exc, BaseExceptionGroup):
        leaves = [e for e in exc.exceptions if not isinstance(e, trio.Cancelled)]
        if not leaves:
            return "cancelled"
        exc = leaves[0]
    if isinstance(exc, ServerFailed):
        return exc.reason
    if isinstance(exc, MCPError):
        return f"error {exc.code}: {exc.message}"
    if isinstance(exc, ValidationError):
        return describe_invalid(exc)
    text = str(exc).splitlines()[0] if str(exc) else ""
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
