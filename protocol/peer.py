"""A JSON-RPC 2.0 peer over a trio stream — the one trio shell around `framing` and `jsonrpc`.

Both ends use it: the daemon registers methods on a `Router` and serves each connection with a
`JsonRpcPeer`; clients call `JsonRpcPeer.request` / `notify` and receive server notifications
through `on_notification`. A peer is symmetric: either side may do both.

Contract (PROTOCOL.md §1–§2):

- Incoming requests: params are decoded strictly into the route's type (absent or null params
  mean ``{}``; an array is -32602 since every method takes named parameters); a failure lists
  every issue (`InvalidParams`, via `protocol.validate`). Inline routes are answered in the
  reader task (for methods that never wait); the others run in their own task in the peer's
  nursery. Unknown methods get -32601; a request id already in flight gets -32600.
- Handler failures are isolated: an `RpcError` goes on the wire as itself; any other
  `Exception` is logged (logger ``protocol.peer``) and answered -32603 "internal error" with no
  detail. `trio.Cancelled` always propagates. Nothing a handler does closes the connection.
- ``$/cancelRequest {id}`` cancels that request's task and answers it -32800 at once; a late
  result of the cancelled handler is dropped. Other unknown ``$/…`` notifications are ignored;
  a notification naming a route runs it with its outcome dropped; any other notification goes
  to `on_notification`.
- Batches are answered with one array holding the replies of their requests (and invalid
  elements), or nothing when there are none.
- Writes: every frame goes out whole under one `trio.StrictFIFOLock`, in the order the lock
  is taken. A free lock is taken without a checkpoint and, on a socket stream, the frame goes
  out in one non-blocking write when the socket takes it all; whatever it does not take goes
  through a shielded ``send_all``, so a cancelled writer never tears a frame. The reader's
  own replies pass no scheduler pass of their own; any other writer passes one checkpoint.
  A stuck remote is cut off by `aclose`, which closes the stream under the shielded write.
- A remote that does not read what it asked for is cut off: the frames waiting behind a full
  socket (each charged its size plus `WAITER_COST`) and the replies held for the rest of their
  batch (each charged its size) may hold `max_queued_bytes` at most, or one frame or reply
  alone whatever its size; the one that would pass it closes the connection (logged), as
  `aclose` does. Without it, a client that sent requests and read none of the replies made
  the daemon hold them all, and a batch's replies were held without being counted.
- Replies use the framing of the first frame received (a client's own choice until then).
- End of input (half-close): requests already read are still answered; then `run` closes the
  stream and returns. A Content-Length frame the end cut short is answered -32700 saying
  what was missing (it runs nothing). A frame over the cap is answered -32600 with
  ``data.limit``, a framing violation -32700, and reading stops as at end of input. A broken
  connection cancels every handler of this peer. Whenever reading ends, every request still
  awaiting a reply fails with `ConnectionLost`; a request whose write fails because the remote
  closed fails with what the remote said first without an id (a server's -32600 for a frame
  over its cap), if it did.

Its size is one concept: the trio shell of a JSON-RPC connection (reader, writer lock, dispatch,
cancellation, pending requests); its sans-I/O core lives in `jsonrpc.py` and `framing.py`.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final, TypeVar, overload

import msgspec
import trio
from msgspec import Struct

from protocol import jsonrpc, validate
from protocol.errors import (
    InternalError,
    InvalidParams,
    InvalidRequest,
    Issue,
    MethodNotFound,
    ParseError,
    RequestCancelled,
    RpcError,
)
from protocol.framing import (
    DEFAULT_MAX_FRAME_BYTES,
    FrameDecoder,
    FrameTooLarge,
    Framing,
    FramingError,
    encode_frame,
)
from protocol.jsonrpc import (
    ConnectionLost,
    MalformedResponse,
    Notification,
    Request,
    RequestId,
    Response,
)
from protocol.last_words import refusal_in, refusal_of

__all__ = [
    "CANCEL_METHOD",
    "DEFAULT_MAX_QUEUED_BYTES",
    "WAITER_COST",
    "CallContext",
    "CancelNotice",
    "ConnectionLost",
    "Handler",
    "JsonRpcPeer",
    "MalformedResponse",
    "NotificationCallback",
    "Route",
    "Router",
]

logger = logging.getLogger("protocol.peer")

P = TypeVar("P")
R = TypeVar("R")
T = TypeVar("T")

CANCEL_METHOD: Final = "$/cancelRequest"

#: The most the frames waiting for a full socket may hold, per connection (decision 50 of
#: docs/architecture.md): four default frame caps.
DEFAULT_MAX_QUEUED_BYTES: Final = 64 * 1024 * 1024
#: What one frame waiting for the socket costs beyond its bytes: its task and what that task
#: holds (so that a flood of tiny replies is bounded too: 4,096 of them at the default).
WAITER_COST: Final = 16 * 1024

#: ``async def handler(params, ctx) -> result``; result is a Struct, a dict, a list or None.
Handler = Callable[[Any, "CallContext"], Awaitable[Any]]
#: ``callback(method, params)`` for notifications no route handles; sync and must not block.
NotificationCallback = Callable[[str, msgspec.Raw], None]


# -- routing --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Route:
    """One registered method: its name, params type, handler and where it runs."""

    name: str
    params_type: Any
    handler: Handler
    inline: bool
    decoder: msgspec.json.Decoder[Any]
    #: The method's own checks of well-shaped params (a path that must exist, a pattern that
    #: must parse), run on what is left of params refused for their shape — given the names
    #: of the members taken out, so a check that depends on one of them can hold back — so one
    #: -32602 lists every problem (PROTOCOL §2).
    more_issues: Callable[[Any, frozenset[str]], list[Issue]] | None = None
    #: A valid value for each required member `more_issues` may stand in for when that member
    #: is at fault (``{"cwd": "/"}``), so its checks still run on the rest; issues at a
    #: stood-in member are dropped.
    stand_ins: Mapping[str, Any] = field(default_factory=dict)


class Router:
    """The methods one side of a connection serves. Routes are shared by every peer that uses
    the router; per-connection data belongs in `CallContext.state`."""

    def __init__(self) -> None:
        self._routes: dict[str, Route] = {}

    def method(
        self,
        name: str,
        params_type: type[P],
        *,
        inline: bool = False,
        more_issues: Callable[[P, frozenset[str]], list[Issue]] | None = None,
        stand_ins: Mapping[str, Any] | None = None,
    ) -> Callable[
        [Callable[[P, CallContext], Awaitable[R]]], Callable[[P, CallContext], Awaitable[R]]
    ]:
        """Register the decorated ``async def handler(params: P, ctx) -> result`` for `name`.

        ``inline=True`` answers in the reader task: only for handlers that never wait on
        anything slow, since the connection reads nothing else meanwhile. `more_issues`: the
        handler's own checks as a quick, side-effect-free function, and `stand_ins` what they
        may run with for a required member at fault (see `Route`).
        """

        def register(
            handler: Callable[[P, CallContext], Awaitable[R]],
        ) -> Callable[[P, CallContext], Awaitable[R]]:
            self.add(
                name,
                params_type,
                handler,
                inline=inline,
                more_issues=more_issues,
                stand_ins=stand_ins,
            )
            return handler

        return register

    def add(
        self,
        name: str,
        params_type: Any,
        handler: Handler,
        *,
        inline: bool = False,
        more_issues: Callable[[Any, frozenset[str]], list[Issue]] | None = None,
        stand_ins: Mapping[str, Any] | None = None,
    ) -> None:
        """Register `handler` for `name`; a name may be registered once."""
        if name in self._routes:
            raise ValueError(f"method {name!r} is already registered")
        if name == CANCEL_METHOD:
            raise ValueError(f"{CANCEL_METHOD} is handled by the peer itself")
        decoder: msgspec.json.Decoder[Any] = msgspec.json.Decoder(params_type)
        self._routes[name] = Route(
            name, params_type, handler, inline, decoder, more_issues, dict(stand_ins or {})
        )

    def get(self, name: str) -> Route | None:
        return self._routes.get(name)

    def __contains__(self, name: object) -> bool:
        return name in self._routes

    @property
    def names(self) -> list[str]:
        return sorted(self._routes)


class CallContext(Struct, frozen=True):
    """What a handler knows about its call: the peer (to send notifications), the method, the
    request id (None for a notification), the connection-scoped `state` dict, and `arrival`:
    where the message came in the connection's order (1 for the first request or notification
    read, counting both). Handlers run as tasks in no set order; `arrival` tells which of two
    messages the remote sent first."""

    peer: JsonRpcPeer
    method: str
    request_id: RequestId | None
    arrival: int = 0

    @property
    def state(self) -> dict[str, Any]:
        return self.peer.state


# -- bookkeeping ----------------------------------------------------------------------------

_Deliver = Callable[[bytes], Awaitable[None]]


@dataclass(eq=False, slots=True)
class _Outgoing:
    """One of our requests awaiting its reply; only the reader settles it, by setting event."""

    event: trio.Event = field(default_factory=trio.Event)
    result: msgspec.Raw | None = None
    error: BaseException | None = None

    def settle(self, result: msgspec.Raw | None, error: BaseException | None) -> None:
        if not self.event.is_set():
            self.result, self.error = result, error
            self.event.set()


@dataclass(eq=False, slots=True)
class _InFlight:
    """A spawned request still running. `answered` flips exactly once, without a checkpoint
    between test and set, so a request gets exactly one reply."""

    deliver: _Deliver
    scope: trio.CancelScope = field(default_factory=trio.CancelScope)
    answered: bool = False


class _BatchReplies:
    """Collects the replies of one batch and sends them as one array once all have come.

    A reply held here waits for the remote as much as a frame behind the write lock does, so
    it counts against the peer's bound from the moment it comes (`hold`, which cuts the
    remote off instead when the bound would pass) until the array is handed to `send`
    (`release`), which then counts the array as any frame. It costs its bytes alone: no task
    waits for it, the one that made it has ended."""

    def __init__(
        self,
        send: _Deliver,
        hold: Callable[[int], Awaitable[None]],
        release: Callable[[int], None],
        expected: int,
    ) -> None:
        self._send = send
        self._hold = hold
        self._release = release
        self._remaining = expected
        self._bodies: list[bytes] = []
        self._held = 0

    async def deliver(self, body: bytes) -> None:
        await self._hold(len(body))
        self._held += len(body)
        self._bodies.append(body)
        self._remaining -= 1
        if self._remaining == 0:
            bodies, self._bodies = self._bodies, []
            self._release(self._held)
            self._held = 0
            await self._send(jsonrpc.encode_batch(bodies))


class _CancelParams(msgspec.Struct):
    id: int | str


#: The notification telling the remote that our request `id` was withdrawn: its method and
#: params. JSON-RPC names none; robotad's protocol takes LSP's (``$/cancelRequest {id}``),
#: ACP has its own (``$/cancel_request {requestId}``).
CancelNotice = Callable[[int], tuple[str, dict[str, Any]]]


def _lsp_cancel(request_id: int) -> tuple[str, dict[str, Any]]:
    return CANCEL_METHOD, {"id": request_id}


# -- the peer -------------------------------------------------------------------------------


class JsonRpcPeer:
    """One JSON-RPC connection over `stream`.

    The peer owns `stream` from `run` on: `run` closes it when it returns. `framing`, when
    given, is the framing of both sides: clients choose it, and so does ``robotactl acp``,
    whose editor speaks NDJSON, so that a first line that is no JSON (a person typing
    ``hello``) is answered -32700 like any later one instead of ending the connection as a
    framing no reader knows. A server leaves it None, sniffs the remote's framing from its
    first byte and answers in it. `max_frame_bytes` caps incoming
    frames. `on_notification` receives notifications no route handles. `max_queued_bytes`
    bounds what waits for a remote that does not read (see the module docstring).
    """

    def __init__(
        self,
        stream: trio.abc.Stream,
        router: Router | None = None,
        *,
        framing: Framing | None = None,
        max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES,
        on_notification: NotificationCallback | None = None,
        receive_size: int = 64 * 1024,
        cancel_notice: CancelNotice | None = None,
        max_queued_bytes: int = DEFAULT_MAX_QUEUED_BYTES,
    ) -> None:
        self.stream = stream
        self._max_queued_bytes = max_queued_bytes
        #: What the frames waiting for the write lock cost now (`WAITER_COST` each, and more).
        self._queued_bytes = 0
        #: How the remote is told that a request of ours was withdrawn (`CancelNotice`).
        self._cancel_notice = cancel_notice or _lsp_cancel
        self.router = router if router is not None else Router()
        #: Connection-scoped data of the application (e.g. its subscriptions).
        self.state: dict[str, Any] = {}
        #: Requests and notifications read so far (`CallContext.arrival`).
        self._arrivals = 0
        self._chosen_framing = framing
        self._decoder = FrameDecoder(max_frame_bytes=max_frame_bytes, framing=framing)
        self._on_notification = on_notification
        self._receive_size = receive_size
        self._write_lock = trio.StrictFIFOLock()
        self._outgoing: dict[int, _Outgoing] = {}
        self._next_id = 1
        self._in_flight: dict[RequestId, _InFlight] = {}
        self._nursery: trio.Nursery | None = None
        self._started = False
        self._receiving = True  # replies to our requests can still arrive
        self._sending = True  # frames can still be written
        self._finished = trio.Event()
        self._reader_task: trio.lowlevel.Task | None = None
        #: An error the remote sent without an id (it could not tell which frame of ours it
        #: refused: one over its size limit, say), kept for a write that fails after it.
        self._refusal: RpcError | None = None

    @property
    def framing(self) -> Framing:
        """The framing of what this side sends."""
        return self._decoder.framing or self._chosen_framing or "ndjson"

    @property
    def closed(self) -> bool:
        """True once nothing more can be sent."""
        return not self._sending

    # -- lifecycle --------------------------------------------------------------------------

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Serve the connection until its input ends and every request read is answered, or
        until it breaks; then close the stream. Ready (for `request`) once started."""
        if self._started:
            raise RuntimeError("a JsonRpcPeer runs once")
        self._started = True
        try:
            async with trio.open_nursery() as nursery:
                self._nursery = nursery
                task_status.started()
                try:
                    await self._read_loop()
                finally:
                    self._stop_receiving()
        finally:
            self._sending = False
            self._stop_receiving()
            self._finished.set()
            await self.stream.aclose()

    async def wait_finished(self) -> None:
        """Return once `run` has ended: the connection is over and nothing more arrives."""
        await self._finished.wait()

    async def aclose(self) -> None:
        """Stop now: cancel reading and every handler, fail waiting requests, close the
        stream (which also ends a write stuck on a remote that does not read)."""
        self._sending = False
        self._stop_receiving()
        if self._nursery is not None:
            self._nursery.cancel_scope.cancel()
        await trio.aclose_forcefully(self.stream)

    # -- outgoing ---------------------------------------------------------------------------

    @overload
    async def request(self, method: str, params: Any = None, *, result_type: type[T]) -> T: ...
    @overload
    async def request(self, method: str, params: Any = None, *, result_type: Any = None) -> Any: ...
    async def request(self, method: str, params: Any = None, *, result_type: Any = None) -> Any:
        """Call `method` and wait for its reply.

        Returns the result decoded as `result_type` (plain JSON values when None). Raises the
        remote's error as its `RpcError` subclass, `ConnectionLost` if the connection ends
        first, `MalformedResponse` for an unusable reply. If the caller is cancelled while
        waiting, its entry is dropped (a late reply is ignored) and ``$/cancelRequest`` is sent
        on its behalf.
        """
        if not self._receiving:
            raise ConnectionLost("connection closed")
        request_id = self._next_id
        self._next_id += 1
        slot = _Outgoing()
        self._outgoing[request_id] = slot
        sent = False
        try:
            await self._send(jsonrpc.encode_request(request_id, method, params))
            sent = True
            await slot.event.wait()
        finally:
            del self._outgoing[request_id]
            if sent and not slot.event.is_set():
                self._cancel_remote(request_id)
        if slot.error is not None:
            raise slot.error
        assert slot.result is not None
        return jsonrpc.decode_result(method, slot.result, result_type)

    async def notify(self, method: str, params: Any = None, *, checkpoint: bool = True) -> None:
        """Send a notification. Raises `ConnectionLost` when the connection is closed.

        With `checkpoint` False a notification the socket takes at once passes no checkpoint
        after it: for a caller about to pass one anyway (a delivery loop that waits for its
        next event next), so that one notification costs the event loop one round, not two.
        """
        await self._send(jsonrpc.encode_notification(method, params), checkpoint=checkpoint)

    async def _send(self, body: bytes, *, checkpoint: bool = True) -> None:
        """Write one frame whole; the only way anything reaches the stream.

        The fast path (decision 1 of docs/architecture.md): when no writer holds the lock,
        the frame goes out with one non-blocking write, with no checkpoint and without taking
        the lock (nothing can come between the check and the write). Only when the socket
        does not take it all is the lock taken (still free: nothing was awaited since the
        check) and the rest written with the shielded ``send_all``, so frames stay whole and
        in order. A caller other than this peer's reader then passes one checkpoint, as every
        trio operation does; the reader needs none (its next receive is one).
        """
        if not self._sending:
            raise ConnectionLost("connection closed")
        await trio.lowlevel.checkpoint_if_cancelled()
        lock = self._write_lock
        if lock.locked():
            await self._send_queued(body)
            return
        if not self._sending:
            raise ConnectionLost("connection closed")
        frame = encode_frame(body, self.framing)
        written = _write_nonblocking(self.stream, frame)
        if written < len(frame):
            lock.acquire_nowait()
            try:
                await self._send_shielded(frame[written:] if written else frame)
            finally:
                lock.release()
        if checkpoint and trio.lowlevel.current_task() is not self._reader_task:
            await trio.lowlevel.cancel_shielded_checkpoint()

    async def _send_queued(self, body: bytes) -> None:
        """`_send` behind a writer holding the lock: wait in FIFO order, then write; or, when
        the waiting frames would cost more than `max_queued_bytes`, cut the remote off (see
        `_hold`)."""
        frame = encode_frame(body, self.framing)
        cost = len(frame) + WAITER_COST
        await self._hold(cost)
        try:
            async with self._write_lock:
                if not self._sending:
                    raise ConnectionLost("connection closed")
                await self._send_shielded(frame)
        finally:
            self._unhold(cost)

    async def _hold(self, cost: int) -> None:
        """Count `cost` more bytes as waiting for the remote — a frame behind the write lock, a
        reply held for the rest of its batch — or, when that would pass `max_queued_bytes`,
        cut the remote off (logged) and raise `ConnectionLost`. What waits alone always waits,
        however large (an export of a long session): the bound applies from the second."""
        if not self._sending:
            raise ConnectionLost("connection closed")
        held = self._queued_bytes + cost
        if self._queued_bytes and held > self._max_queued_bytes:
            logger.warning(
                "closing a connection: the replies waiting for it would hold %d bytes, over "
                "its bound of %d (%d frames wait for the socket, the rest for their batch)",
                held,
                self._max_queued_bytes,
                self._write_lock.statistics().tasks_waiting,
            )
            await self.aclose()
            raise ConnectionLost(
                "connection closed: more replies wait for the remote than it may hold"
            )
        self._queued_bytes = held

    def _unhold(self, cost: int) -> None:
        """What `_hold` counted no longer waits."""
        self._queued_bytes -= cost

    async def _send_shielded(self, data: bytes) -> None:
        """``send_all`` of `data` (the caller holds the lock), never torn by cancellation."""
        try:
            with trio.CancelScope(shield=True):
                await self.stream.send_all(data)
        except (trio.BrokenResourceError, trio.ClosedResourceError) as exc:
            refusal = self._last_words() if self._outgoing else None
            self._broken()
            if refusal is not None:
                raise refusal from None
            raise ConnectionLost("connection closed by the remote") from exc

    def _last_words(self) -> RpcError | None:
        """Why the remote closed while a request of ours was being written, if it said so
        (`protocol.last_words`): the reader may have met it already; else it waits unread."""
        stream = self.stream
        if self._refusal is None and type(stream) is trio.SocketStream:
            fd = stream.socket.fileno()
            self._refusal = refusal_of(fd, self._decoder, self._receive_size)
        return self._refusal

    def _cancel_remote(self, request_id: int) -> None:
        if self._sending and self._nursery is not None:
            # RuntimeError: the nursery is already closing, so there is nobody to tell.
            with contextlib.suppress(RuntimeError):
                self._nursery.start_soon(self._send_cancel, request_id)

    async def _send_cancel(self, request_id: int) -> None:
        method, params = self._cancel_notice(request_id)
        with contextlib.suppress(ConnectionLost):
            await self.notify(method, params)

    def _stop_receiving(self) -> None:
        self._receiving = False
        for slot in self._outgoing.values():
            slot.settle(None, ConnectionLost("connection closed before the reply arrived"))

    def _broken(self) -> None:
        """Nothing can be written any more: whoever runs here has nobody to answer."""
        self._sending = False
        self._stop_receiving()
        if self._nursery is not None:
            self._nursery.cancel_scope.cancel()

    # -- incoming ---------------------------------------------------------------------------

    async def _read_loop(self) -> None:
        self._reader_task = trio.lowlevel.current_task()
        try:
            while True:
                try:
                    data = await self._receive()
                except (trio.BrokenResourceError, trio.ClosedResourceError):
                    self._broken()
                    return
                if not data:
                    for body in self._decoder.feed_eof():
                        await self._handle_frame(body)
                    if (cut_short := self._decoder.cut_short) is not None:
                        refused = ParseError(f"parse error: the stream ended inside {cut_short}")
                        await self._send(jsonrpc.encode_error(None, refused))
                    return
                try:
                    frames = self._decoder.feed(data)
                except FramingError as exc:
                    for body in exc.frames:
                        await self._handle_frame(body)
                    await self._send(jsonrpc.encode_error(None, _framing_error(exc)))
                    return
                for body in frames:
                    await self._handle_frame(body)
        except ConnectionLost:
            return

    async def _receive(self) -> bytes | bytearray:
        """The next bytes from the stream (``b""`` at its end).

        On a socket stream the usual exchange — the remote waits for a reply before it writes
        again — takes one wait for readability and one ``read`` of the socket, without trio's
        per-call wrapper; bytes that were there without waiting pass one checkpoint first, so
        a remote that writes without pause cannot keep this connection's other tasks, or
        other connections, from running. Other streams use their ``receive_some``.
        """
        stream = self.stream
        if type(stream) is not trio.SocketStream:
            return await stream.receive_some(self._receive_size)
        socket = stream.socket
        waited = False
        while True:
            fd = socket.fileno()
            if fd < 0:
                raise trio.ClosedResourceError("the socket was closed")
            try:
                data = os.read(fd, self._receive_size)
            except BlockingIOError:
                await trio.lowlevel.wait_readable(socket)
                waited = True
                continue
            except OSError as exc:
                raise trio.BrokenResourceError(f"socket read failed: {exc}") from exc
            if not waited:
                await trio.lowlevel.cancel_shielded_checkpoint()  # the bytes are read: no loss
            return data

    async def _handle_frame(self, body: bytes) -> None:
        frame = jsonrpc.parse_frame(body)
        deliver: _Deliver = self._send
        if frame.batch:
            expected = sum(isinstance(m, Request | jsonrpc.Invalid) for m in frame.messages)
            deliver = _BatchReplies(self._send, self._hold, self._unhold, expected).deliver
        for message in frame.messages:
            if isinstance(message, Request):
                await self._on_request(message, deliver)
            elif isinstance(message, Notification):
                await self._on_notification_message(message)
            elif isinstance(message, Response):
                self._on_response(message)
            else:
                await deliver(jsonrpc.encode_error(message.id, message.error))

    async def _on_request(self, request: Request, deliver: _Deliver) -> None:
        self._arrivals += 1
        route = self.router.get(request.method)
        if route is None:
            if request.method == CANCEL_METHOD:  # known, but only as a notification
                error: RpcError = InvalidRequest(
                    f"invalid request: {CANCEL_METHOD} is a notification: send it without an id"
                )
            else:
                error = MethodNotFound(request.method)
            await deliver(jsonrpc.encode_error(request.id, error))
            return
        if request.id in self._in_flight:
            error = InvalidRequest(f"invalid request: request id {request.id!r} is in flight")
            await deliver(jsonrpc.encode_error(request.id, error))
            return
        ctx = CallContext(self, request.method, request.id, self._arrivals)
        if route.inline:
            await deliver(await self._call(route, request.params, ctx))
            return
        assert self._nursery is not None
        flight = _InFlight(deliver)
        self._in_flight[request.id] = flight
        self._nursery.start_soon(self._serve_spawned, route, request, ctx, flight)

    async def _serve_spawned(
        self, route: Route, request: Request, ctx: CallContext, flight: _InFlight
    ) -> None:
        reply: bytes | None = None
        try:
            with flight.scope:
                reply = await self._call(route, request.params, ctx)
        finally:
            if self._in_flight.get(request.id) is flight:
                del self._in_flight[request.id]
        if reply is None or flight.answered:
            return  # cancelled: `_cancel` has answered -32800 already
        flight.answered = True
        with contextlib.suppress(ConnectionLost):
            await flight.deliver(reply)

    async def _call(self, route: Route, params: msgspec.Raw | None, ctx: CallContext) -> bytes:
        """Run one handler to its encoded reply; every failure becomes an error reply."""
        try:
            value = _decode_params(route, params)
            result = await route.handler(value, ctx)
            return jsonrpc.encode_result(ctx.request_id, result)
        except Exception as exc:
            error = _sole_rpc_error(exc)
            if error is None:
                logger.error("handler of %s failed", route.name, exc_info=exc)
                error = InternalError()
            return jsonrpc.encode_error(ctx.request_id, error)

    async def _on_notification_message(self, notice: Notification) -> None:
        self._arrivals += 1
        if notice.method == CANCEL_METHOD:
            await self._cancel(notice.params)
            return
        route = self.router.get(notice.method)
        if route is not None:
            ctx = CallContext(self, notice.method, None, self._arrivals)
            if route.inline:
                await self._call(route, notice.params, ctx)
            else:
                assert self._nursery is not None
                self._nursery.start_soon(self._call, route, notice.params, ctx)
            return
        if notice.method.startswith("$/") or self._on_notification is None:
            return
        try:
            self._on_notification(notice.method, notice.params or msgspec.Raw(b"{}"))
        except Exception:
            logger.exception("notification callback failed for %s", notice.method)

    async def _cancel(self, params: msgspec.Raw | None) -> None:
        if params is None:
            return
        try:
            target = msgspec.json.decode(params, type=_CancelParams).id
        except msgspec.DecodeError:
            return  # names no request: nothing to cancel
        flight = self._in_flight.pop(target, None)
        if flight is None or flight.answered:
            return
        flight.answered = True
        flight.scope.cancel()
        await flight.deliver(jsonrpc.encode_error(target, RequestCancelled()))

    def _on_response(self, response: Response) -> None:
        self._refusal = self._refusal or refusal_in(response)
        slot = self._outgoing.get(response.id) if type(response.id) is int else None
        if slot is None:
            return  # nothing awaits it (e.g. its requester was cancelled)
        if response.problem is not None:
            slot.settle(None, MalformedResponse(response.problem))
        else:
            slot.settle(response.result, response.error)


# -- helpers --------------------------------------------------------------------------------

_EMPTY_PARAMS: Final = b"{}"


def _decode_params(route: Route, params: msgspec.Raw | None) -> Any:
    """Params as the route's type, or `InvalidParams` listing every issue."""
    if params is None:
        data: bytes | msgspec.Raw = _EMPTY_PARAMS
    elif jsonrpc.params_kind(params) == "array":
        raise InvalidParams(
            [{"path": "$", "message": "expected an object of named parameters, got an array"}]
        )
    else:
        data = params
    try:
        return route.decoder.decode(data)
    except msgspec.DecodeError:
        pass
    try:
        validate.decode_json(bytes(data), route.params_type)
    except validate.ValidationFailed as exc:
        raise InvalidParams(exc.issues + _more_issues(route, bytes(data), exc.issues)) from None
    # The walker accepted what msgspec refused; msgspec is the authority on validity.
    raise InvalidParams([{"path": "$", "message": "params do not match the method's schema"}])


def _more_issues(route: Route, data: bytes, issues: list[Issue]) -> list[Issue]:
    """The route's own issues of what is left of refused params once every member at fault
    is taken out, a required one replaced by its stand-in (nothing when a required member
    without a stand-in is at fault, or nothing is checked)."""
    if route.more_issues is None:
        return []
    try:
        params = msgspec.json.decode(data)
    except msgspec.DecodeError:
        return []
    if not isinstance(params, dict):
        return []
    faulty = {_top_member(issue["path"]) for issue in issues}
    if None in faulty:
        return []
    at_fault = frozenset(name for name in faulty if name is not None)
    kept = {key: value for key, value in params.items() if key not in at_fault}
    for name in at_fault:
        if name in route.stand_ins:
            kept[name] = route.stand_ins[name]
    try:
        value = msgspec.convert(kept, route.params_type)
    except msgspec.ValidationError:
        return []
    return [
        issue
        for issue in route.more_issues(value, at_fault)
        if _top_member(issue["path"]) not in at_fault
    ]


def _top_member(path: str) -> str | None:
    """The top-level member a ``$.name…`` path starts in (None for ``$`` itself, or a name in
    brackets: rare, and then nothing is taken out)."""
    match = re.match(r"\$\.([A-Za-z_][A-Za-z0-9_]*)", path)
    return match.group(1) if match else None


def _write_nonblocking(stream: trio.abc.Stream, frame: bytes) -> int:
    """Bytes of `frame` one non-blocking write to `stream`'s socket took: 0 when the socket
    is full, when the write failed (``send_all`` then meets the failure and reports it), or
    when `stream` is no socket stream."""
    if type(stream) is not trio.SocketStream:
        return 0
    fd = stream.socket.fileno()
    if fd < 0:
        return 0
    try:
        return os.write(fd, frame)
    except OSError:
        return 0


def _sole_rpc_error(exc: BaseException) -> RpcError | None:
    """The `RpcError` a handler raised, also when a nursery wrapped it alone in a group."""
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    return exc if isinstance(exc, RpcError) else None


def _framing_error(exc: FramingError) -> RpcError:
    if isinstance(exc, FrameTooLarge):
        return InvalidRequest(f"invalid request: {exc}", {"limit": exc.limit})
    return ParseError(f"parse error: {exc}")
