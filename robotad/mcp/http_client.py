"""robotad's HTTP client for one streamable-HTTP MCP server: one request's failure is its own.

The SDK's streamable-HTTP transport posts each JSON-RPC message on its own, through the HTTP
client it is given, and leaves three things to that client (decision 41):

- a request's POST lived on after its call gave up: the SDK's ``notifications/cancelled``
  did not end it, so it waited for the client's read timeout (300 s), and that timeout, like
  any failure of a POST, raised in the SDK's task group and tore down the whole transport,
  failing every call on it;
- a message no caller waits for (that cancel, a notification) is posted in line: the SDK
  sends nothing else until the server has answered it;
- a read timeout bounds one read, so an answer dripped a byte at a time was read for as long
  as it dripped.

`McpHttpClient` is that client. Its `send` reads the JSON-RPC message a POST carries and:

- gives a request's POST a deadline, `patience` seconds after it is sent (the longer of the
  server's tool and startup timeouts; its read timeout is the same), for the answer's head
  and for each read of its body, and abandons it at once when ``notifications/cancelled``
  names its id (its call gave up). A POST that times out, fails or is abandoned fails when
  its answer is read, with `refuse(reason)`, which the SDK reads as the failure of that one
  request, quoting the reason: the connection and its other calls carry on. A failure to
  connect is left to the SDK: the server is unreachable, so is the connection, which is
  started again (a new handshake) on the next call;
- posts a message no caller waits for in the background, within the same deadline, and
  tells the SDK at once that the server took it (``202``); ``notifications/initialized``
  alone is posted in line, since the requests after it must follow it;
- passes anything else through untouched: the GET event stream, which may idle for minutes,
  and the DELETE at close.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import contextmanager
from typing import Any, Final

import httpx2
import msgspec
import trio
from mcp.shared._httpx_utils import (
    MCP_DEFAULT_SSE_READ_TIMEOUT,
    MCP_DEFAULT_TIMEOUT,
    next_request_within_origin,
)

from robotad.http_bounds import Refuse
from robotad.log import fields
from robotad.mcp.config import ServerSpec

__all__ = ["McpHttpClient"]

log = logging.getLogger("robotad.mcp")

RequestId = int | str
#: The messages posted in line though no caller waits for them.
_IN_LINE: Final = frozenset({"notifications/initialized"})


class _Message(msgspec.Struct):
    """What robotad reads of a posted JSON-RPC message: a request has both."""

    method: str | None = None
    id: RequestId | None = None


class _CancelParams(msgspec.Struct):
    requestId: RequestId | None = None


class _Cancel(msgspec.Struct):
    params: _CancelParams


class McpHttpClient(httpx2.AsyncClient):
    """The HTTP client for `spec`'s server (module doc). `refuse` makes the exception a failed
    POST's answer raises when read; `nursery` runs the background posts and must outlive the
    client (its cancellation ends them)."""

    def __init__(self, spec: ServerSpec, refuse: Refuse, nursery: trio.Nursery) -> None:
        super().__init__(
            headers=dict(spec.headers),
            timeout=httpx2.Timeout(MCP_DEFAULT_TIMEOUT, read=MCP_DEFAULT_SSE_READ_TIMEOUT),
        )
        self.patience = max(spec.tool_timeout, spec.startup_timeout)
        self._server = spec.name
        self._refuse = refuse
        self._nursery = nursery
        self._flights: dict[RequestId, _Flight] = {}

    async def send(self, request: httpx2.Request, **options: Any) -> httpx2.Response:
        message = _message_of(request)
        if message is None:
            return await super().send(request, **options)
        if message.id is not None and message.method is not None:
            return await self._send_request(request, message.id, options)
        if message.method == "notifications/cancelled":
            self._abandon(request)
        if message.method in _IN_LINE:
            return await super().send(request, **options)
        what = message.method or "an answer to the server's request"
        self._nursery.start_soon(self._post_in_background, request, what)
        return httpx2.Response(202, request=request)

    async def _send_request(
        self, request: httpx2.Request, key: RequestId, options: dict[str, Any]
    ) -> httpx2.Response:
        flight = _Flight(trio.current_time() + self.patience, self.patience)
        self._flights[key] = flight
        timeout = request.extensions.get("timeout", {})
        request.extensions = {**request.extensions, "timeout": {**timeout, "read": self.patience}}
        try:
            with flight.waiting() as waited:
                response = await super().send(request, **options)
        except (httpx2.ConnectError, httpx2.ConnectTimeout):
            self._land(key, flight)
            raise
        except httpx2.TransportError as exc:
            self._land(key, flight)
            return self._failed(request, _transport_failure(exc))
        if waited.cancelled_caught:
            self._land(key, flight)
            return self._failed(request, flight.reason)
        if isinstance(response.stream, httpx2.AsyncByteStream):
            response.stream = _FlightStream(
                response.stream, flight, self._refuse, lambda: self._land(key, flight)
            )
        else:  # never, from an async client
            self._land(key, flight)
        return response

    def _failed(self, request: httpx2.Request, reason: str) -> httpx2.Response:
        """An answer that fails with `reason` when read: an event stream, which the SDK reads
        as the failure of its request alone (and, unlike a JSON answer, without logging a
        traceback)."""
        failure = _Failing(self._refuse(reason))
        headers = {"Content-Type": "text/event-stream"}
        return httpx2.Response(200, headers=headers, stream=failure, request=request)

    def _land(self, key: RequestId, flight: _Flight) -> None:
        if self._flights.get(key) is flight:
            del self._flights[key]

    def _abandon(self, request: httpx2.Request) -> None:
        try:
            cancel = msgspec.json.decode(request.content, type=_Cancel)
        except msgspec.MsgspecError:
            return
        key = cancel.params.requestId
        if key is not None and (flight := self._flights.get(key)) is not None:
            flight.abandon()

    async def _post_in_background(self, request: httpx2.Request, what: str) -> None:
        """Post `request` within the deadline, following a redirect within the server's
        origin as the SDK does; a failure is logged, never raised."""
        with trio.move_on_after(self.patience) as bound:
            try:
                for _ in range(self.max_redirects + 1):
                    response = await super().send(request, stream=True, follow_redirects=False)
                    try:
                        await response.aread()
                    finally:
                        await response.aclose()
                    follow = next_request_within_origin(response)
                    if follow is None:
                        break
                    request = follow
            except Exception as exc:
                log.info(
                    "posting %s failed: %s: %s",
                    what,
                    type(exc).__name__,
                    exc,
                    extra=fields(mcp_server=self._server),
                )
        if bound.cancelled_caught:
            log.info(
                "the server did not take %s within %d ms",
                what,
                round(self.patience * 1000),
                extra=fields(mcp_server=self._server),
            )


class _Flight:
    """One request's POST: its deadline, and whether it was abandoned (its call gave up)."""

    def __init__(self, deadline: float, patience: float) -> None:
        self.deadline = deadline
        self.abandoned = False
        self._patience = patience
        self._scope: trio.CancelScope | None = None

    @property
    def reason(self) -> str:
        """Why a wait of the POST ended early."""
        if self.abandoned:
            return "abandoned: the call gave up"
        return f"did not answer within {round(self._patience * 1000)} ms"

    def abandon(self) -> None:
        self.abandoned = True
        if self._scope is not None:
            self._scope.cancel()

    @contextmanager
    def waiting(self) -> Iterator[trio.CancelScope]:
        """A scope for one wait of the POST (its answer's head, a read of its body), cancelled
        at the deadline or when the POST is abandoned."""
        with trio.CancelScope(deadline=self.deadline) as scope:
            if self.abandoned:
                scope.cancel()
            self._scope = scope
            try:
                yield scope
            finally:
                self._scope = None


class _FlightStream(httpx2.AsyncByteStream):
    """The body of a request's answer, each read within its flight's `waiting`; a read that
    times out, fails or is abandoned raises `refuse(reason)`. `landed` runs at its close."""

    def __init__(
        self,
        inner: httpx2.AsyncByteStream,
        flight: _Flight,
        refuse: Refuse,
        landed: Callable[[], None],
    ) -> None:
        self._inner = inner
        self._flight = flight
        self._refuse = refuse
        self._landed = landed

    async def __aiter__(self) -> AsyncIterator[bytes]:
        chunks = aiter(self._inner)
        while True:
            chunk: bytes | None = None
            try:
                with self._flight.waiting():
                    chunk = await anext(chunks)
            except StopAsyncIteration:
                return
            except httpx2.SSEError:
                raise  # a bound of `robotad.http_bounds`, refused already
            except httpx2.TransportError as exc:
                raise self._refuse(_transport_failure(exc)) from None
            if chunk is None:
                raise self._refuse(self._flight.reason)
            yield chunk

    async def aclose(self) -> None:
        self._landed()
        await self._inner.aclose()


class _Failing(httpx2.AsyncByteStream):
    """No bytes: `failure` when read."""

    def __init__(self, failure: Exception) -> None:
        self._failure = failure

    async def __aiter__(self) -> AsyncIterator[bytes]:
        nothing: tuple[bytes, ...] = ()
        for chunk in nothing:
            yield chunk
        raise self._failure

    async def aclose(self) -> None:
        pass


def _message_of(request: httpx2.Request) -> _Message | None:
    """The JSON-RPC message `request` posts, or None (not a POST, or not one message)."""
    if request.method != "POST":
        return None
    try:
        return msgspec.json.decode(request.content, type=_Message)
    except (msgspec.MsgspecError, httpx2.RequestNotRead):
        return None


def _transport_failure(exc: httpx2.TransportError) -> str:
    """What went wrong with one POST, once it had connected."""
    if isinstance(exc, httpx2.TimeoutException):
        return f"the connection to the server timed out ({type(exc).__name__})"
    detail = str(exc) or type(exc).__name__
    if isinstance(exc, httpx2.NetworkError | httpx2.RemoteProtocolError):
        return f"the connection to the server broke before it answered: {detail}"
    return f"{type(exc).__name__}: {detail}"
