"""Real clients, unmodified: socat in both framings against a peer on a Unix socket, the way
protocol/REFERENCE.md shows it (half-close included: socat shuts its sending side at EOF)."""

from __future__ import annotations

import os
import shutil
import socket
import tempfile
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from functools import partial
from pathlib import Path
from typing import Any

import msgspec
import pytest
import trio

from protocol.framing import FrameDecoder
from protocol.methods import Empty, SessionRef
from protocol.peer import CallContext, JsonRpcPeer, Router
from tests.protocol.wire_harness import HANG_GUARD_SECONDS

pytestmark = pytest.mark.skipif(shutil.which("socat") is None, reason="socat is not installed")


def make_router() -> Router:
    router = Router()

    @router.method("daemon/status", Empty, inline=True)
    async def status(params: Empty, ctx: CallContext) -> dict[str, Any]:
        return {"pid": os.getpid()}

    @router.method("session/get", SessionRef)
    async def get(params: SessionRef, ctx: CallContext) -> dict[str, Any]:
        for _ in range(3):  # a spawned handler that yields before answering
            await trio.lowlevel.checkpoint()
        await ctx.peer.notify("session/event", {"sessionId": params.session_id})
        return {"sessionId": params.session_id}

    return router


@asynccontextmanager
async def daemon_socket() -> AsyncIterator[Path]:
    with tempfile.TemporaryDirectory(prefix="rs-") as folder:
        path = Path(folder) / "d.sock"
        sock = trio.socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        await sock.bind(os.fspath(path))
        sock.listen()
        router = make_router()

        async def serve(stream: trio.SocketStream) -> None:
            await JsonRpcPeer(stream, router).run()

        async with trio.open_nursery() as nursery:
            nursery.start_soon(partial(trio.serve_listeners, serve, [trio.SocketListener(sock)]))
            yield path
            nursery.cancel_scope.cancel()


async def socat(path: Path, data: bytes) -> bytes:
    with trio.fail_after(HANG_GUARD_SECONDS):
        result = await trio.run_process(
            ["socat", "-t", "5", "-", f"UNIX-CONNECT:{path}"], stdin=data, capture_stdout=True
        )
    return result.stdout


async def test_socat_ndjson_with_half_close() -> None:
    async with daemon_socket() as path:
        out = await socat(
            path,
            b'{"jsonrpc":"2.0","id":1,"method":"session/get","params":{"sessionId":"demo"}}\n'
            b'{"jsonrpc":"2.0","id":2,"method":"daemon/status"}\n',
        )
    lines = [msgspec.json.decode(line) for line in out.splitlines()]
    assert {"jsonrpc": "2.0", "id": 2, "result": {"pid": os.getpid()}} in lines
    assert {"jsonrpc": "2.0", "id": 1, "result": {"sessionId": "demo"}} in lines
    assert {"jsonrpc": "2.0", "method": "session/event", "params": {"sessionId": "demo"}} in lines
    assert len(lines) == 3


async def test_socat_content_length_batch_as_in_the_reference() -> None:
    body = (
        b'[{"jsonrpc":"2.0","id":1,"method":"daemon/status"},\n'
        b' {"jsonrpc":"2.0","id":2,"method":"session/get","params":{"sessionId":"../x"}}]'
    )
    async with daemon_socket() as path:
        out = await socat(path, b"Content-Length: %d\r\n\r\n" % len(body) + body)
    assert out.startswith(b"Content-Length: ")
    frames = FrameDecoder().feed(out)
    assert len(frames) == 1
    replies = {reply["id"]: reply for reply in msgspec.json.decode(frames[0])}
    assert replies[1]["result"] == {"pid": os.getpid()}
    assert replies[2]["error"]["code"] == -32602
    assert replies[2]["error"]["data"]["issues"][0]["path"] == "$.sessionId"
