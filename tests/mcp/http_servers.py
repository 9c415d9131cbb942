"""A streamable-HTTP MCP server on 127.0.0.1 that misbehaves on ``tools/call`` as told.

`serve_mcp(nursery, answer)` starts it in the test's nursery and returns a `MisbehavingServer`:
it serves the handshake (``initialize``, ``tools/list`` with the one tool ``big``, 202 for a
notification, 405 for the GET event stream) as a real server does, and answers every
``tools/call`` with `answer` — the status, headers and body pieces it sends, then either an
end (the connection closes) or a stall (it waits until the client goes away); or, `silent`,
nothing at all until the client goes away; or, `hang_up`, nothing at all: it closes the
connection. Bodies are sent without a length, so only the
connection's end says where they stop. With `answer_cancels=False` it never answers a
``notifications/cancelled`` either (it notes the id it names, in `cancelled`). With
`sessions=True` it gives each ``initialize`` a session of its own (``Mcp-Session-Id: s1``,
``s2``…), as a server that keeps sessions does.

It counts what it got to send (`sent`): what robotad read, or the socket buffers hold. A test
of a bound sends more than the bound, up to a cap, and checks that the count stayed under the
cap: without the bound robotad would have read it all (measured by bytes, never by time).
"""

from __future__ import annotations

import gzip
import itertools
import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import trio

__all__ = ["Answer", "MisbehavingServer", "serve_mcp", "sse_event"]

#: The one tool the server lists.
TOOL: dict[str, Any] = {"name": "big", "inputSchema": {"type": "object"}}


@dataclass
class Answer:
    """What the server sends for a ``tools/call``: the id of the call replaces ``{id}`` in the
    first piece. `pieces` may be endless (an iterator); with `gzip` they are joined and sent
    compressed, saying so (``Content-Encoding: gzip``). `arrived` is set when the call
    arrives; with `after` the answer waits for it. `interval` seconds pass between pieces (a
    drip). `done` is set when the server is through with the call: it sent all, or the client
    went away."""

    pieces: Iterable[bytes]
    content_type: str = "application/json"
    status: int = 200
    headers: list[tuple[str, str]] = field(default_factory=list)
    stall: bool = False
    gzip: bool = False
    arrived: trio.Event = field(default_factory=trio.Event)
    after: trio.Event | None = None
    silent: bool = False
    hang_up: bool = False
    interval: float = 0.0
    done: trio.Event = field(default_factory=trio.Event)


@dataclass
class MisbehavingServer:
    url: str
    #: Request headers of each ``tools/call`` (names lower-cased).
    call_headers: list[dict[str, str]] = field(default_factory=list)
    #: Bytes of ``tools/call`` bodies sent so far.
    sent: int = 0
    #: The request ids ``notifications/cancelled`` named.
    cancelled: list[Any] = field(default_factory=list)
    #: Whether each ``initialize`` gets a session id (see the module doc), and how many did.
    sessions: bool = False
    initialized: int = 0


def sse_event(message: dict[str, Any]) -> bytes:
    return b"event: message\ndata: " + json.dumps(message).encode() + b"\n\n"


async def serve_mcp(
    nursery: trio.Nursery, *answers: Answer, answer_cancels: bool = True, sessions: bool = False
) -> MisbehavingServer:
    """The server (module doc), listening until `nursery` is cancelled; the n-th call gets
    the n-th of `answers` (the last one once they run out)."""
    listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
    port = listeners[0].socket.getsockname()[1]
    server = MisbehavingServer(url=f"http://127.0.0.1:{port}/mcp", sessions=sessions)

    async def handle(stream: trio.SocketStream) -> None:
        try:
            await _serve_connection(stream, server, answers, answer_cancels)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass
        finally:
            await stream.aclose()

    nursery.start_soon(trio.serve_listeners, handle, listeners)
    return server


async def _serve_connection(
    stream: trio.SocketStream,
    server: MisbehavingServer,
    answers: tuple[Answer, ...],
    answer_cancels: bool,
) -> None:
    buffer = b""
    while True:
        while b"\r\n\r\n" not in buffer:
            data = await stream.receive_some()
            if not data:
                return
            buffer += data
        head, _, buffer = buffer.partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        method = lines[0].split(" ")[0]
        headers = {
            k.strip().lower(): v.strip() for k, _, v in (x.partition(":") for x in lines[1:])
        }
        length = int(headers.get("content-length", "0"))
        while len(buffer) < length:
            buffer += await stream.receive_some()
        body, buffer = buffer[:length], buffer[length:]
        if method != "POST":
            await stream.send_all(_response(405, "text/plain", b"no"))
            continue
        message = json.loads(body)
        if message.get("method") == "tools/call":
            answer = answers[min(len(server.call_headers), len(answers) - 1)]
            server.call_headers.append(headers)
            await _misbehave(stream, server, answer, message["id"])
            return
        if message.get("method") == "notifications/cancelled":
            server.cancelled.append(message["params"]["requestId"])
            if not answer_cancels:
                await _wait_until_gone(stream)
                return
        await stream.send_all(_handshake_answer(message, server))


def _handshake_answer(message: dict[str, Any], server: MisbehavingServer) -> bytes:
    if "id" not in message:
        return _response(202, "text/plain", b"")
    result: dict[str, Any] = {"tools": [TOOL]}
    session = ""
    if message["method"] == "initialize":
        result = {
            "protocolVersion": message["params"]["protocolVersion"],
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "misbehaving", "version": "1"},
        }
        server.initialized += 1
        session = f"Mcp-Session-Id: s{server.initialized}\r\n" if server.sessions else ""
    body = json.dumps({"jsonrpc": "2.0", "id": message["id"], "result": result}).encode()
    return _response(200, "application/json", body, session)


def _response(status: int, content_type: str, body: bytes, headers: str = "") -> bytes:
    head = f"HTTP/1.1 {status} X\r\nContent-Type: {content_type}\r\n{headers}"
    return f"{head}Content-Length: {len(body)}\r\n\r\n".encode() + body


async def _misbehave(
    stream: trio.SocketStream, server: MisbehavingServer, answer: Answer, call_id: Any
) -> None:
    try:
        await _answer(stream, server, answer, call_id)
    finally:
        answer.done.set()


async def _answer(
    stream: trio.SocketStream, server: MisbehavingServer, answer: Answer, call_id: Any
) -> None:
    answer.arrived.set()
    if answer.hang_up:
        return
    if answer.silent:
        await _wait_until_gone(stream)
        return
    if answer.after is not None:
        await answer.after.wait()
    head = f"HTTP/1.1 {answer.status} X\r\nContent-Type: {answer.content_type}\r\n"
    head += "".join(f"{name}: {value}\r\n" for name, value in answer.headers)
    if answer.gzip:
        head += "Content-Encoding: gzip\r\n"
    await stream.send_all(f"{head}Connection: close\r\n\r\n".encode())
    pieces = iter(answer.pieces)
    first = [next(pieces).replace(b"{id}", json.dumps(call_id).encode())]
    if answer.gzip:
        pieces, first = iter(()), [gzip.compress(b"".join([*first, *pieces]))]
    for n, piece in enumerate(itertools.chain(first, pieces)):
        if n and answer.interval:
            await trio.sleep(answer.interval)
        await stream.send_all(piece)
        server.sent += len(piece)
    if answer.stall:
        await _wait_until_gone(stream)


async def _wait_until_gone(stream: trio.SocketStream) -> None:
    """Read (and drop) what the client sends until it closes the connection."""
    while await stream.receive_some():
        pass
