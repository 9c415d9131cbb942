"""Loopback fake model servers: a tiny trio HTTP/1.1 server speaking Server-Sent Events.

`FakeModelServer` listens on 127.0.0.1 (port 0), records every request it gets, and answers
each with the next scripted `Reply` (the last one repeats when the script runs out). A reply is
either a plain body (an error JSON) or an SSE stream, framed chunked or by closing the
connection, optionally stalling after some events until the client goes away, or resetting
the connection after some events. The server notes
when a client closes a connection it was still streaming on (`peer_closed`), which is how the
cancellation tests observe that the provider really closed its HTTP stream. It also counts
the connections it accepted and keeps those still open, so a test can see connections being
reused, dropped by the server (`drop_connections`) or closed by the client (`wait_all_closed`);
`stop` takes the whole server away (its port then refuses connections). A `judge` stands in
for the checks of a real API: what it answers for a request (an error `Reply`) is sent instead
of the next scripted reply, which then waits for the next request.

The builders below produce the real wire formats: OpenAI chat-completion chunks (`data: {...}`
lines ending with `data: [DONE]`) and Anthropic Messages events (`event: ...` + `data: ...`).
"""

from __future__ import annotations

import json
import socket
import struct
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Literal

import trio

__all__ = [
    "FakeModelServer",
    "RecordedRequest",
    "Reply",
    "anthropic_error",
    "anthropic_stream",
    "openai_chunk",
    "openai_error",
    "openai_stream",
    "sse",
]

_REASONS = {
    200: "OK",
    400: "Bad Request",
    401: "Unauthorized",
    403: "Forbidden",
    429: "Too Many Requests",
    500: "Internal Server Error",
    503: "Service Unavailable",
}


@dataclass
class Reply:
    """One scripted answer. `events` (already SSE-framed) make it a stream; otherwise `body`
    is sent with a Content-Length. `stall_after` sends that many events, then holds the
    connection open without a byte until the client closes it."""

    status: int = 200
    body: bytes = b""
    events: list[bytes] = field(default_factory=list)
    headers: list[tuple[str, str]] = field(default_factory=list)
    framing: Literal["chunked", "close"] = "chunked"
    stall_after: int | None = None
    #: Send that many events, then reset the connection (RST, not a clean close).
    reset_after: int | None = None
    coalesce: bool = True
    #: The Content-Type sent (default: text/event-stream with events, else application/json).
    content_type: str | None = None


@dataclass
class RecordedRequest:
    method: str
    path: str
    headers: dict[str, str]
    body: Any


class FakeModelServer:
    """Serve `replies` in order, one per request; `run` is started with `nursery.start`."""

    def __init__(
        self,
        replies: Iterable[Reply],
        judge: Callable[[RecordedRequest], Reply | None] | None = None,
    ) -> None:
        self.replies = list(replies)
        self.judge = judge
        self.requests: list[RecordedRequest] = []
        self.peer_closed = trio.Event()
        self.stalled = trio.Event()
        self.port = 0
        #: Connections accepted so far.
        self.accepted = 0
        self._served = 0
        self._open: set[trio.SocketStream] = set()
        self._closed_one = trio.Event()
        self._stopper = trio.CancelScope()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def provider_config(
        self, kind: str, *, name: str = "fake", path: str = "", model: str | None = None
    ) -> str:
        """A robotad configuration naming this server provider `name` of `kind`, its base
        URL this server's with `path` after it, its key a fixed fake one."""
        model_line = f'model = "{model}"\n' if model is not None else ""
        return (
            f'[providers.{name}]\nkind = "{kind}"\nbase_url = "{self.base_url}{path}"\n'
            f'{model_line}api_key_command = "echo sk-test"\n'
        )

    @property
    def open_connections(self) -> int:
        """Connections accepted and not closed yet (by either side)."""
        return len(self._open)

    async def run(self, *, task_status: trio.TaskStatus[int] = trio.TASK_STATUS_IGNORED) -> None:
        with self._stopper:
            listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
            self.port = listeners[0].socket.getsockname()[1]
            async with trio.open_nursery() as nursery:
                nursery.start_soon(trio.serve_listeners, self._serve_connection, listeners)
                task_status.started(self.port)

    def stop(self) -> None:
        """Close the listener and every connection: the server is gone."""
        self._stopper.cancel()

    async def drop_connections(self) -> None:
        """Close every open connection, as a server whose keep-alive time ran out would; the
        listener stays."""
        for stream in list(self._open):
            self._open.discard(stream)
            await stream.aclose()

    async def wait_all_closed(self) -> None:
        """Return once no accepted connection is open any more."""
        while self._open:
            self._closed_one = trio.Event()
            await self._closed_one.wait()

    def _next_reply(self) -> Reply:
        reply = self.replies[min(self._served, len(self.replies) - 1)]
        self._served += 1
        return reply

    async def _serve_connection(self, stream: trio.SocketStream) -> None:
        buffer = bytearray()
        self.accepted += 1
        self._open.add(stream)
        try:
            while True:
                request = await _read_request(stream, buffer)
                if request is None:
                    return
                self.requests.append(request)
                refusal = self.judge(request) if self.judge is not None else None
                if not await self._answer(stream, refusal or self._next_reply()):
                    return
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            if stream in self._open:  # not closed by `drop_connections`
                self.peer_closed.set()
        finally:
            self._open.discard(stream)
            self._closed_one.set()
            await stream.aclose()

    async def _answer(self, stream: trio.SocketStream, reply: Reply) -> bool:
        """Send one reply; False when the connection is done afterwards."""
        reason = _REASONS.get(reply.status, "Status")
        head = [f"HTTP/1.1 {reply.status} {reason}"]
        head += [f"{name}: {value}" for name, value in reply.headers]
        if not reply.events:
            kind = reply.content_type or "application/json"
            head += [f"Content-Type: {kind}", f"Content-Length: {len(reply.body)}"]
            await stream.send_all(_head(head) + reply.body)
            return True
        head.append(f"Content-Type: {reply.content_type or 'text/event-stream'}")
        chunked = reply.framing == "chunked"
        head.append("Transfer-Encoding: chunked" if chunked else "Connection: close")
        await stream.send_all(_head(head))
        cut = len(reply.events) if reply.stall_after is None else reply.stall_after
        cut = cut if reply.reset_after is None else reply.reset_after
        for piece in _pieces(reply.events[:cut], reply.coalesce):
            await stream.send_all(_frame(piece, chunked))
        if reply.reset_after is not None:
            # Linger 0: closing sends a reset.
            stream.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            return False
        if reply.stall_after is not None:
            self.stalled.set()
            # Hold the stream open; the only way out is the client closing the connection.
            while await stream.receive_some(65536):
                pass
            self.peer_closed.set()
            return False
        if chunked:
            await stream.send_all(b"0\r\n\r\n")
            return True
        return False


def _head(lines: list[str]) -> bytes:
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def _pieces(events: list[bytes], coalesce: bool) -> Iterable[bytes]:
    if not coalesce:
        yield from events
        return
    batch = bytearray()
    for event in events:
        batch += event
        if len(batch) >= 65536:
            yield bytes(batch)
            batch.clear()
    if batch:
        yield bytes(batch)


def _frame(piece: bytes, chunked: bool) -> bytes:
    return b"%x\r\n%s\r\n" % (len(piece), piece) if chunked else piece


async def _read_request(stream: trio.SocketStream, buffer: bytearray) -> RecordedRequest | None:
    """Read one request (headers + Content-Length body); None at a clean EOF."""
    while b"\r\n\r\n" not in buffer:
        data = await stream.receive_some(65536)
        if not data:
            return None
        buffer += data
    end = buffer.index(b"\r\n\r\n")
    lines = bytes(buffer[:end]).decode("latin-1").split("\r\n")
    del buffer[: end + 4]
    method, path, _version = lines[0].split(" ", 2)
    headers: dict[str, str] = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    length = int(headers.get("content-length", "0"))
    while len(buffer) < length:
        data = await stream.receive_some(65536)
        if not data:
            return None
        buffer += data
    raw = bytes(buffer[:length])
    del buffer[:length]
    body = json.loads(raw) if raw else None
    return RecordedRequest(method, path, headers, body)


# -- wire builders -------------------------------------------------------------------------


def sse(data: Any, event: str | None = None) -> bytes:
    """One SSE event; `data` is JSON-encoded unless it is already a string."""
    text = data if isinstance(data, str) else json.dumps(data, separators=(",", ":"))
    prefix = f"event: {event}\n" if event else ""
    return f"{prefix}data: {text}\n\n".encode()


def openai_chunk(
    delta: dict[str, Any] | None = None,
    *,
    finish_reason: str | None = None,
    usage: dict[str, int] | None = None,
) -> bytes:
    """One `chat.completion.chunk`; with `usage` and no delta it is the final usage chunk."""
    chunk: dict[str, Any] = {
        "id": "chatcmpl-fake",
        "object": "chat.completion.chunk",
        "created": 1700000000,
        "model": "fake-model",
        "choices": [],
    }
    if delta is not None or finish_reason is not None:
        chunk["choices"] = [
            {"index": 0, "delta": delta or {}, "finish_reason": finish_reason, "logprobs": None}
        ]
    if usage is not None:
        chunk["usage"] = usage
    return sse(chunk)


def openai_stream(
    texts: Iterable[str] = (),
    *,
    tool_deltas: Iterable[list[dict[str, Any]]] = (),
    finish_reason: str = "stop",
    usage: dict[str, int] | None = None,
    done: bool = True,
) -> list[bytes]:
    """A whole Chat Completions stream: role chunk, text deltas, tool-call deltas, finish,
    the usage chunk (`choices: []`) and `[DONE]`."""
    events = [openai_chunk({"role": "assistant", "content": ""})]
    events += [openai_chunk({"content": text}) for text in texts]
    events += [openai_chunk({"tool_calls": calls}) for calls in tool_deltas]
    events.append(openai_chunk(finish_reason=finish_reason))
    if usage is not None:
        events.append(openai_chunk(usage=usage))
    if done:
        events.append(sse("[DONE]"))
    return events


def openai_error(status: int, message: str, kind: str = "invalid_request_error") -> Reply:
    body = json.dumps({"error": {"message": message, "type": kind, "code": None}}).encode()
    return Reply(status=status, body=body)


def anthropic_stream(
    blocks: Iterable[dict[str, Any]],
    *,
    stop_reason: str = "end_turn",
    input_tokens: int = 10,
    output_tokens: int = 5,
    stop: bool = True,
) -> list[bytes]:
    """A whole Messages stream. Each block is ``{"text": [deltas]}`` or
    ``{"tool_use": (id, name, [partial_json pieces])}``."""
    message = {
        "id": "msg_fake",
        "type": "message",
        "role": "assistant",
        "model": "claude-fake",
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": {"input_tokens": input_tokens, "output_tokens": 1},
    }
    events = [sse({"type": "message_start", "message": message}, "message_start")]
    events.append(sse({"type": "ping"}, "ping"))
    for index, block in enumerate(blocks):
        if "text" in block:
            start: dict[str, Any] = {"type": "text", "text": ""}
            deltas = [{"type": "text_delta", "text": piece} for piece in block["text"]]
        else:
            call_id, name, pieces = block["tool_use"]
            start = {"type": "tool_use", "id": call_id, "name": name, "input": {}}
            deltas = [{"type": "input_json_delta", "partial_json": piece} for piece in pieces]
        events.append(
            sse(
                {"type": "content_block_start", "index": index, "content_block": start},
                "content_block_start",
            )
        )
        events += [
            sse({"type": "content_block_delta", "index": index, "delta": d}, "content_block_delta")
            for d in deltas
        ]
        events.append(sse({"type": "content_block_stop", "index": index}, "content_block_stop"))
    events.append(
        sse(
            {
                "type": "message_delta",
                "delta": {"stop_reason": stop_reason, "stop_sequence": None},
                "usage": {"output_tokens": output_tokens},
            },
            "message_delta",
        )
    )
    if stop:
        events.append(sse({"type": "message_stop"}, "message_stop"))
    return events


def anthropic_error(status: int, message: str, kind: str = "invalid_request_error") -> Reply:
    body = json.dumps({"type": "error", "error": {"type": kind, "message": message}}).encode()
    return Reply(status=status, body=body)
