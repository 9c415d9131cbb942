"""A blocking JSON-RPC client on robotad's Unix socket, without trio: for one-shot callers.

    with open_blocking_connection() as client:
        status = client.request("daemon/status")
        info = client.request("session/get", {"sessionId": sid}, result_type=SessionInfo)

The standard `socket` module moves the bytes; everything else is the sans-I/O core the trio
peer (`protocol.peer`) uses: `protocol.framing` cuts what arrives into frames, `protocol.jsonrpc`
encodes the requests, classifies the messages and rebuilds a daemon's error as its `RpcError`
subclass (`RpcError.from_wire`), so ``except SessionBusy`` works here as it does there. The
client's own failures are the peer's too: `ConnectionLost` and `MalformedResponse`, plus
`RequestTimeout` for a reply that did not come in time. This module never imports trio.

Contract:

- Requests go one at a time; `request` returns when its reply has been read. A client is for
  one thread.
- Every wait has a bound: connecting, `connect_timeout` (a full backlog is waited for, and a
  `connect_watcher` told about that wait, as `protocol.unix_connect` says); each request
  (writing it and reading its reply), the request's `timeout`, else the client's. ``None``
  waits as long as the daemon takes, as the trio peer does. A request past its bound raises
  `RequestTimeout` after sending ``$/cancelRequest`` for it (best effort); the connection
  stays usable, and the late reply is skipped when it comes, like any reply nobody awaits.
- While a request waits for its reply, a `WaitWatcher` (the client's `watcher`) is told how
  long it has waited, first at once and then as often as it asks, and that the wait ended: what
  a person is shown meanwhile, and when to give up on a silent daemon, are the caller's
  decision. An exception it raises propagates out of `request`; the request is not cancelled.
- While a request waits, notifications arriving before its reply (a connection that
  ``session/run`` or ``session/compact`` subscribed gets ``session/event``) go, in order, to
  `on_notification`, or nowhere without one; an exception it raises propagates out of
  `request`. ``$/…`` notifications are ignored. A request from the daemon (none in protocol
  version 1) is answered -32601.
- An error reply with a null id (a frame the daemon could not read, such as one over its size
  limit) fails the request that is waiting. A reply without a usable result or error, or a
  message that is not JSON-RPC, fails it with `MalformedResponse`; so does a framing violation,
  which also closes the client.
- The daemon closing the connection, a reset, or a write it refuses raises `ConnectionLost` and
  closes the client — unless it said why before it closed (a request over its size limit gets
  -32600 and the connection closes while the request is still being written): then that
  error. After that, and after `close`, every request raises `ConnectionLost`.

Its size is one concept: a complete blocking JSON-RPC client (connect, request, batch,
notifications, close) that must not import trio.
"""

from __future__ import annotations

import contextlib
import enum
import os
import socket
import time
from collections.abc import Callable
from types import TracebackType
from typing import Any, Final, Protocol, TypeVar, overload

from msgspec import Raw

from protocol import jsonrpc
from protocol.errors import MethodNotFound
from protocol.framing import (
    DEFAULT_MAX_FRAME_BYTES,
    FrameDecoder,
    Framing,
    FramingError,
    encode_frame,
)
from protocol.jsonrpc import (
    ConnectionLost,
    Invalid,
    MalformedResponse,
    Notification,
    Request,
    Response,
)
from protocol.last_words import refusal_of
from protocol.socket_path import resolve_socket_path
from protocol.unix_connect import CONNECT_TIMEOUT, ConnectWatcher, connect_unix

__all__ = [
    "CANCEL_NOTICE_TIMEOUT",
    "CONNECT_TIMEOUT",
    "DEFAULT_TIMEOUT",
    "BlockingClient",
    "BlockingNotificationCallback",
    "ConnectionLost",
    "MalformedResponse",
    "RequestTimeout",
    "WaitWatcher",
    "open_blocking_connection",
]

T = TypeVar("T")

#: Seconds a request waits for its reply unless the client or the request says otherwise.
DEFAULT_TIMEOUT: Final = 60.0
#: Seconds spent sending ``$/cancelRequest`` for a request that timed out.
CANCEL_NOTICE_TIMEOUT: Final = 1.0

_CANCEL_METHOD: Final = "$/cancelRequest"
_EMPTY_PARAMS: Final = Raw(b"{}")

#: ``callback(method, params)`` for the daemon's notifications; runs in the caller's thread.
BlockingNotificationCallback = Callable[[str, Raw], None]


class RequestTimeout(TimeoutError):
    """No reply to `method` within `timeout` seconds (or it could not even be sent)."""

    def __init__(self, method: str, timeout: float) -> None:
        super().__init__(f"no reply to {method} within {timeout:g} s")
        self.method = method
        self.timeout = timeout


class WaitWatcher(Protocol):
    """Told about each request's wait for its reply (`BlockingClient.watcher`)."""

    def waiting(self, method: str, waited: float) -> float | None:
        """The request for `method` has waited `waited` seconds for its reply so far: 0 once
        it is sent, then after each delay this returns (None: not again). May raise, to end
        the wait."""
        ...

    def ended(self) -> None:
        """The wait that `waiting` was told about ended, however it ended."""
        ...


class _Alarm:
    """When the request waiting for `method` next tells `watcher` (`at`, monotonic; None:
    never)."""

    def __init__(self, watcher: WaitWatcher, method: str) -> None:
        self.watcher = watcher
        self.method = method
        self.started = time.monotonic()
        self.at: float | None = None
        self._ring(0.0)

    def ring(self) -> None:
        self._ring(time.monotonic() - self.started)

    def _ring(self, waited: float) -> None:
        delay = self.watcher.waiting(self.method, waited)
        self.at = None if delay is None else self.started + waited + max(delay, 0.0)


class _Inherit(enum.Enum):
    """The default of `BlockingClient.request`'s timeout: the client's own."""

    TOKEN = enum.auto()


_INHERIT: Final = _Inherit.TOKEN


class _Expired(Exception):
    """A deadline passed while writing or reading; the caller knows which request it was."""


def open_blocking_connection(
    path: str | os.PathLike[str] | None = None,
    *,
    framing: Framing = "ndjson",
    connect_timeout: float | None = CONNECT_TIMEOUT,
    connect_watcher: ConnectWatcher | None = None,
    timeout: float | None = DEFAULT_TIMEOUT,
    on_notification: BlockingNotificationCallback | None = None,
    max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES,
) -> BlockingClient:
    """Connect to the daemon socket at `path` (resolved as PROTOCOL.md §1 says when None).

    Raises `OSError` as connect(2) reports it (`FileNotFoundError`, `ConnectionRefusedError`:
    nothing listens there; `PermissionError`), as `protocol.client.open_connection` does, and
    `TimeoutError` when the daemon's backlog stays full for `connect_timeout` seconds (None:
    wait as long as it takes); `connect_watcher` is told about that wait, and may end it by
    raising (`protocol.unix_connect`). The other arguments are `BlockingClient`'s.
    """
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        connect_unix(
            sock,
            os.fspath(resolve_socket_path(path)),
            timeout=connect_timeout,
            watcher=connect_watcher,
        )
    except BaseException:
        sock.close()
        raise
    return BlockingClient(
        sock,
        framing=framing,
        timeout=timeout,
        on_notification=on_notification,
        max_frame_bytes=max_frame_bytes,
    )


class BlockingClient:
    """One connection to the daemon over the connected stream socket `sock`, which the client
    owns from here on and closes in `close` (also when a ``with`` block ends).

    `framing` frames what this side sends (replies are read in whichever framing they come);
    `timeout` bounds each request unless it names its own; `max_frame_bytes` caps an incoming
    frame; `on_notification` receives the daemon's notifications; `watcher` (also settable
    later) is told about each wait for a reply.
    """

    def __init__(
        self,
        sock: socket.socket,
        *,
        framing: Framing = "ndjson",
        timeout: float | None = DEFAULT_TIMEOUT,
        on_notification: BlockingNotificationCallback | None = None,
        max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES,
        receive_size: int = 64 * 1024,
        watcher: WaitWatcher | None = None,
    ) -> None:
        self.timeout = timeout
        self.watcher = watcher
        self.framing: Framing = framing
        self._socket = sock
        self._decoder = FrameDecoder(max_frame_bytes=max_frame_bytes)
        self._on_notification = on_notification
        self._receive_size = receive_size
        self._next_id = 1
        self._closed = False

    @property
    def socket(self) -> socket.socket:
        """The connected socket (for ``SO_PEERCRED`` and the like); do not read or write it
        while the client is in use (once its last reply is in, its end may be awaited)."""
        return self._socket

    @property
    def closed(self) -> bool:
        """True once `close` ran or the connection broke; requests then raise."""
        return self._closed

    def close(self) -> None:
        """Close the connection. Idempotent."""
        if not self._closed:
            self._closed = True
            self._socket.close()

    def __enter__(self) -> BlockingClient:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    # -- outgoing ---------------------------------------------------------------------------

    @overload
    def request(
        self,
        method: str,
        params: Any = None,
        *,
        result_type: type[T],
        timeout: float | _Inherit | None = _INHERIT,
    ) -> T: ...
    @overload
    def request(
        self,
        method: str,
        params: Any = None,
        *,
        result_type: Any = None,
        timeout: float | _Inherit | None = _INHERIT,
    ) -> Any: ...
    def request(
        self,
        method: str,
        params: Any = None,
        *,
        result_type: Any = None,
        timeout: float | _Inherit | None = _INHERIT,
    ) -> Any:
        """Call `method` and wait for its reply, at most `timeout` seconds (default: the
        client's `timeout`; None: no bound).

        Returns the result decoded as `result_type` (plain JSON values when None). Raises the
        daemon's error as its `RpcError` subclass, `RequestTimeout`, `ConnectionLost`,
        `MalformedResponse` for an unusable reply, or what the `watcher` raised.
        """
        limit = self.timeout if isinstance(timeout, _Inherit) else timeout
        deadline = None if limit is None else time.monotonic() + limit
        request_id = self._next_id
        self._next_id += 1
        try:
            self._send(jsonrpc.encode_request(request_id, method, params), deadline)
            result = self._watched_reply(request_id, method, deadline)
        except _Expired:
            assert limit is not None
            self._cancel_remote(request_id)
            raise RequestTimeout(method, limit) from None
        return jsonrpc.decode_result(method, result, result_type)

    def notify(self, method: str, params: Any = None, *, timeout: float | None = None) -> None:
        """Send a notification (nothing is read). Raises `ConnectionLost` when the connection
        is closed, `TimeoutError` when the daemon reads nothing for `timeout` seconds (the
        client is closed then: part of the frame may have gone out)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        try:
            self._send(jsonrpc.encode_notification(method, params), deadline)
        except _Expired:
            raise TimeoutError(f"could not send {method} within {timeout:g} s") from None

    def _cancel_remote(self, request_id: int) -> None:
        """Tell the daemon to stop working on `request_id`, if that can be done at once."""
        if self._closed:
            return
        # Nobody left to tell, or a daemon that does not read: either way, nothing to do.
        with contextlib.suppress(ConnectionLost, TimeoutError):
            self.notify(_CANCEL_METHOD, {"id": request_id}, timeout=CANCEL_NOTICE_TIMEOUT)

    def _send(self, body: bytes, deadline: float | None) -> None:
        """Write one frame whole, or close the client: a frame cut short cannot be resumed."""
        if self._closed:
            raise ConnectionLost("connection closed")
        try:
            self._socket.settimeout(_remaining(deadline))
            self._socket.sendall(encode_frame(body, self.framing))
        except TimeoutError:
            self.close()
            raise _Expired from None
        except OSError as exc:
            refusal = self._refusal()
            self.close()
            if refusal is not None:
                raise refusal from None
            raise ConnectionLost("connection closed by the remote") from exc

    def _refusal(self) -> BaseException | None:
        """The error the daemon answered a frame of ours with before closing the connection
        mid-write (`protocol.last_words`), or None."""
        with contextlib.suppress(OSError):
            self._socket.setblocking(False)
        return refusal_of(self._socket.fileno(), self._decoder, self._receive_size)

    # -- incoming ---------------------------------------------------------------------------

    def _watched_reply(self, request_id: int, method: str, deadline: float | None) -> Raw:
        """`_await_reply`, with the `watcher` (if any) told about the wait."""
        watcher = self.watcher
        if watcher is None:
            return self._await_reply(request_id, deadline, None)
        try:
            return self._await_reply(request_id, deadline, _Alarm(watcher, method))
        finally:
            watcher.ended()

    def _await_reply(self, request_id: int, deadline: float | None, alarm: _Alarm | None) -> Raw:
        """Read until the reply to `request_id` arrives; its result, or its error raised."""
        while True:
            data = self._receive(deadline, alarm)
            try:
                frames = self._decoder.feed(data) if data else self._decoder.feed_eof()
            except FramingError as exc:
                try:  # the frames before the violation are intact: they may hold the reply
                    outcome = self._handle_frames(exc.frames, request_id, deadline)
                finally:
                    self.close()
                if outcome is not None:
                    return _settle(outcome)
                raise MalformedResponse(f"the reply breaks the framing: {exc}") from None
            outcome = self._handle_frames(frames, request_id, deadline)
            if not data:
                self.close()
                if outcome is None:
                    raise ConnectionLost("connection closed before the reply arrived")
            if outcome is not None:
                return _settle(outcome)

    def _receive(self, deadline: float | None, alarm: _Alarm | None) -> bytes:
        """The next bytes of the stream; ``b""`` at its end. Rings `alarm` whenever its time
        comes first."""
        if self._closed:
            raise ConnectionLost("connection closed")
        while True:
            wake = None if alarm is None else alarm.at
            rings = wake is not None and (deadline is None or wake < deadline)
            try:
                self._socket.settimeout(_remaining(wake if rings else deadline))
                return self._socket.recv(self._receive_size)
            except (TimeoutError, _Expired):
                if not rings:
                    raise _Expired from None
            except OSError as exc:
                self.close()
                raise ConnectionLost("connection closed by the remote") from exc
            assert alarm is not None
            alarm.ring()

    def _handle_frames(
        self, frames: list[bytes], request_id: int, deadline: float | None
    ) -> Raw | BaseException | None:
        """Handle every message of `frames` in order; the outcome of `request_id` (a result,
        or the exception to raise for it) once known."""
        outcome: Raw | BaseException | None = None
        for body in frames:
            for message in jsonrpc.parse_frame(body).messages:
                found = self._handle_message(message, request_id, deadline)
                if outcome is None:
                    outcome = found
        return outcome

    def _handle_message(
        self, message: jsonrpc.Message, request_id: int, deadline: float | None
    ) -> Raw | BaseException | None:
        if isinstance(message, Response):
            return _outcome(message, request_id)
        if isinstance(message, Notification):
            if self._on_notification is not None and not message.method.startswith("$/"):
                self._on_notification(message.method, message.params or _EMPTY_PARAMS)
            return None
        if isinstance(message, Request):
            refusal = jsonrpc.encode_error(message.id, MethodNotFound(message.method))
            self._send(refusal, deadline)
            return None
        assert isinstance(message, Invalid)
        return MalformedResponse(f"the daemon sent a message that is not JSON-RPC: {message.error}")


def _outcome(response: Response, request_id: int) -> Raw | BaseException | None:
    """What `response` means for the request `request_id` that is waiting (None: nothing)."""
    if response.id is None and response.error is not None:
        return response.error  # about a frame the daemon could not read: ours
    if response.id != request_id:
        return None  # a late reply to a request that timed out
    if response.problem is not None:
        return MalformedResponse(response.problem)
    if response.error is not None:
        return response.error
    assert response.result is not None
    return response.result


def _settle(outcome: Raw | BaseException) -> Raw:
    if isinstance(outcome, BaseException):
        raise outcome
    return outcome


def _remaining(deadline: float | None) -> float | None:
    """Seconds left before `deadline` (None: no bound); `_Expired` when none are."""
    if deadline is None:
        return None
    left = deadline - time.monotonic()
    if left <= 0:
        raise _Expired
    return left
