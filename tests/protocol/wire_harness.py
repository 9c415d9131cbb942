"""Test helpers: the far end of a connection that speaks raw frames, and a peer served in a
nursery over `trio.testing.memory_stream_pair`."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import msgspec
import trio
import trio.testing

from protocol.framing import DEFAULT_MAX_FRAME_BYTES, FrameDecoder, Framing, encode_frame
from protocol.peer import CallContext, JsonRpcPeer, Router

#: Guard against a hang in a broken implementation; never a timing assertion.
HANG_GUARD_SECONDS = 10


class RawEnd:
    """One end of a connection, writing and reading JSON frames byte for byte."""

    def __init__(self, stream: trio.abc.Stream, framing: Framing = "ndjson") -> None:
        self.stream = stream
        self.framing = framing
        self._decoder = FrameDecoder()
        self._frames: list[bytes] = []

    async def send(self, message: Any) -> None:
        body = message if isinstance(message, bytes) else msgspec.json.encode(message)
        await self.stream.send_all(encode_frame(body, self.framing))

    async def send_bytes(self, data: bytes) -> None:
        await self.stream.send_all(data)

    async def send_eof(self) -> None:
        assert isinstance(self.stream, trio.abc.HalfCloseableStream)
        await self.stream.send_eof()

    async def receive_frame(self) -> bytes | None:
        """The next whole frame body, or None at end of stream."""
        with trio.fail_after(HANG_GUARD_SECONDS):
            while not self._frames:
                data = await self.stream.receive_some()
                if not data:
                    self._frames.extend(self._decoder.feed_eof())
                    if not self._frames:
                        return None
                    break
                self._frames.extend(self._decoder.feed(data))
        return self._frames.pop(0)

    async def receive(self) -> Any:
        """The next frame, decoded; fails at end of stream."""
        body = await self.receive_frame()
        assert body is not None, "connection ended"
        return msgspec.json.decode(body)

    async def expect_eof(self) -> None:
        body = await self.receive_frame()
        assert body is None, f"expected end of stream, got {body!r}"

    @property
    def received_framing(self) -> Framing | None:
        return self._decoder.framing


def call(request_id: int | str, method: str, params: Any = None) -> dict[str, Any]:
    message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
    if params is not None:
        message["params"] = params
    return message


def notice(method: str, params: Any = None) -> dict[str, Any]:
    message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
    if params is not None:
        message["params"] = params
    return message


@dataclass
class Served:
    """A server peer running over memory streams, with the raw client end."""

    client: RawEnd
    peer: JsonRpcPeer
    finished: trio.Event


@asynccontextmanager
async def serving(
    router: Router,
    *,
    framing: Framing = "ndjson",
    max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES,
    wrap: Any = None,
    chosen: Framing | None = None,
) -> AsyncIterator[Served]:
    """Run a peer serving `router`; `wrap` may wrap the server's stream (e.g. to trickle);
    `chosen` is the serving peer's own framing (None: sniffed, as robotad's)."""
    client_stream, server_stream = trio.testing.memory_stream_pair()
    stream = wrap(server_stream) if wrap is not None else server_stream
    peer = JsonRpcPeer(stream, router, max_frame_bytes=max_frame_bytes, framing=chosen)
    finished = trio.Event()

    async def run(task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        try:
            await peer.run(task_status=task_status)
        finally:
            finished.set()

    async with trio.open_nursery() as nursery:
        await nursery.start(run)
        yield Served(RawEnd(client_stream, framing), peer, finished)
        nursery.cancel_scope.cancel()


class TrickleStream(trio.abc.HalfCloseableStream):
    """Wraps a stream so that each ``send_all`` goes out in small pieces with a checkpoint
    between them — the condition under which unlocked writers would interleave frames."""

    def __init__(self, inner: trio.abc.HalfCloseableStream, piece: int = 7) -> None:
        self.inner = inner
        self.piece = piece
        self.first_piece_sent = trio.Event()

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        for start in range(0, len(data), self.piece):
            await self.inner.send_all(data[start : start + self.piece])
            self.first_piece_sent.set()
            await trio.lowlevel.checkpoint()

    async def wait_send_all_might_not_block(self) -> None:
        await self.inner.wait_send_all_might_not_block()

    async def send_eof(self) -> None:
        await self.inner.send_eof()

    async def receive_some(self, max_bytes: int | None = None) -> bytes | bytearray:
        return await self.inner.receive_some(max_bytes)

    async def aclose(self) -> None:
        await self.inner.aclose()


class Empty(msgspec.Struct, forbid_unknown_fields=True):
    """Params of a method that takes none."""


def ping_router() -> Router:
    """A router with one inline method, ``ping``, answering ``{"pong": true}``."""
    routes = Router()

    @routes.method("ping", Empty, inline=True)
    async def ping(params: Empty, ctx: CallContext) -> dict[str, Any]:
        return {"pong": True}

    return routes
