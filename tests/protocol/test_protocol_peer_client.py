"""The JSON-RPC peer as a caller: requests, notifications, lost connections, cancelled
requesters; `open_connection` over a real Unix socket; arbitrary input never breaks a peer."""

from __future__ import annotations

import os
import socket
import tempfile
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import msgspec
import pytest
import trio
import trio.testing
from hypothesis import given, settings
from hypothesis import strategies as st

from protocol.client import open_connection
from protocol.errors import RpcError, SessionBusy
from protocol.framing import Framing, encode_frame
from protocol.peer import (
    CallContext,
    CancelNotice,
    ConnectionLost,
    JsonRpcPeer,
    MalformedResponse,
    Router,
)
from tests.protocol.wire_harness import HANG_GUARD_SECONDS, RawEnd, call

FRAMINGS: list[Framing] = ["ndjson", "content-length"]


class Lookup(msgspec.Struct, forbid_unknown_fields=True, rename="camel"):
    session_id: str


class Info(msgspec.Struct, forbid_unknown_fields=True, rename="camel"):
    session_id: str
    message_count: int


def server_router() -> Router:
    router = Router()

    @router.method("session/get", Lookup)
    async def get(params: Lookup, ctx: CallContext) -> Info:
        if params.session_id == "busy":
            raise SessionBusy("busy", "t1")
        await ctx.peer.notify("session/event", {"sessionId": params.session_id, "seq": 1})
        return Info(params.session_id, 3)

    @router.method("shape", Lookup, inline=True)
    async def shape(params: Lookup, ctx: CallContext) -> dict[str, Any]:
        return {"unexpected": True}

    return router


@asynccontextmanager
async def connected_pair(
    framing: Framing, events: list[tuple[str, Any]]
) -> AsyncIterator[JsonRpcPeer]:
    """A client peer talking to a server peer over memory streams."""
    client_stream, server_stream = trio.testing.memory_stream_pair()
    server = JsonRpcPeer(server_stream, server_router())

    def on_notification(method: str, params: msgspec.Raw) -> None:
        events.append((method, msgspec.json.decode(params)))

    client = JsonRpcPeer(client_stream, framing=framing, on_notification=on_notification)
    async with trio.open_nursery() as nursery:
        await nursery.start(server.run)
        await nursery.start(client.run)
        with trio.fail_after(HANG_GUARD_SECONDS):
            yield client
        nursery.cancel_scope.cancel()


@asynccontextmanager
async def client_against_raw(
    framing: Framing = "ndjson", cancel_notice: CancelNotice | None = None
) -> AsyncIterator[tuple[JsonRpcPeer, RawEnd]]:
    client_stream, server_stream = trio.testing.memory_stream_pair()
    client = JsonRpcPeer(client_stream, framing=framing, cancel_notice=cancel_notice)
    async with trio.open_nursery() as nursery:
        await nursery.start(client.run)
        with trio.fail_after(HANG_GUARD_SECONDS):
            yield client, RawEnd(server_stream, framing)
        nursery.cancel_scope.cancel()


async def request_failing(
    client: JsonRpcPeer,
    method: str,
    error: type[BaseException],
    failures: list[BaseException],
) -> None:
    """Request `method`; the `error` it fails with is added to `failures`."""
    try:
        await client.request(method)
    except error as exc:
        failures.append(exc)


async def withdrawn_request(client: JsonRpcPeer, server: RawEnd, method: str) -> dict[str, Any]:
    """Request `method`, then cancel the requester once the request is on the wire. Returns
    the request as the remote received it."""
    scope = trio.CancelScope()

    async def impatient() -> None:
        with scope:
            await client.request(method)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(impatient)
        first: dict[str, Any] = await server.receive()
        scope.cancel()
    return first


@pytest.mark.parametrize("framing", FRAMINGS)
async def test_typed_request_and_notifications_before_the_reply(framing: Framing) -> None:
    events: list[tuple[str, Any]] = []
    async with connected_pair(framing, events) as client:
        info = await client.request("session/get", {"sessionId": "s1"}, result_type=Info)
        assert info == Info("s1", 3)
        assert events == [("session/event", {"sessionId": "s1", "seq": 1})]
        untyped = await client.request("session/get", Lookup("s2"))
        assert untyped == {"sessionId": "s2", "messageCount": 3}


@pytest.mark.parametrize("framing", FRAMINGS)
async def test_remote_errors_are_rebuilt_as_their_class(framing: Framing) -> None:
    async with connected_pair(framing, []) as client:
        with pytest.raises(SessionBusy) as info:
            await client.request("session/get", {"sessionId": "busy"})
        assert info.value.data == {"sessionId": "busy", "turnId": "t1"}
        with pytest.raises(RpcError) as unknown:
            await client.request("no/such")
        assert unknown.value.code == -32601
        with pytest.raises(RpcError) as invalid:
            await client.request("session/get", {"sessionId": 5})
        assert invalid.value.code == -32602


async def test_result_of_the_wrong_shape_is_a_malformed_response() -> None:
    async with connected_pair("ndjson", []) as client:
        with pytest.raises(MalformedResponse):
            await client.request("shape", {"sessionId": "x"}, result_type=Info)


async def test_unusable_reply_is_a_malformed_response() -> None:
    async with client_against_raw() as (client, server):
        async with trio.open_nursery() as nursery:
            outcome: list[BaseException] = []
            nursery.start_soon(request_failing, client, "x", MalformedResponse, outcome)
            request = await server.receive()
            await server.send({"jsonrpc": "2.0", "id": request["id"]})
        assert len(outcome) == 1


@pytest.mark.parametrize("framing", FRAMINGS)
async def test_pending_requests_fail_when_the_remote_goes_away(framing: Framing) -> None:
    async with client_against_raw(framing) as (client, server):
        failures: list[BaseException] = []
        async with trio.open_nursery() as nursery:
            nursery.start_soon(request_failing, client, "a", ConnectionLost, failures)
            nursery.start_soon(request_failing, client, "b", ConnectionLost, failures)
            assert {(await server.receive())["method"] for _ in range(2)} == {"a", "b"}
            await server.stream.aclose()
        assert len(failures) == 2
        with pytest.raises(ConnectionLost):
            await client.request("c")
        with pytest.raises(ConnectionLost):
            await client.notify("d")


async def test_half_closed_remote_fails_pending_requests() -> None:
    async with client_against_raw() as (client, server):
        failures: list[BaseException] = []
        async with trio.open_nursery() as nursery:
            nursery.start_soon(request_failing, client, "a", ConnectionLost, failures)
            await server.receive()
            await server.send_eof()
        assert len(failures) == 1


async def test_a_withdrawn_request_is_announced_as_the_remote_expects() -> None:
    """ACP names the notice ``$/cancel_request {requestId}``: an editor ignores LSP's, and
    kept a permission question on screen that was answered elsewhere."""
    from robotactl.acp.serve import acp_cancel_notice

    async with client_against_raw(cancel_notice=acp_cancel_notice) as (client, server):
        first = await withdrawn_request(client, server, "session/request_permission")
        assert await server.receive() == {
            "jsonrpc": "2.0",
            "method": "$/cancel_request",
            "params": {"requestId": first["id"]},
        }


async def test_cancelled_requester_does_not_deadlock_the_connection() -> None:
    async with client_against_raw() as (client, server):
        first = await withdrawn_request(client, server, "slow")
        cancel = await server.receive()
        assert cancel == {
            "jsonrpc": "2.0",
            "method": "$/cancelRequest",
            "params": {"id": first["id"]},
        }
        await server.send({"jsonrpc": "2.0", "id": first["id"], "result": "late"})  # ignored

        async def answer_next() -> None:
            request = await server.receive()
            await server.send({"jsonrpc": "2.0", "id": request["id"], "result": "fresh"})

        async with trio.open_nursery() as nursery:
            nursery.start_soon(answer_next)
            assert await client.request("fast") == "fresh"


async def test_client_answers_server_requests_it_cannot_serve() -> None:
    async with client_against_raw() as (_client, server):
        await server.send(call(1, "client/method"))
        assert (await server.receive())["error"]["code"] == -32601


async def test_notification_callback_failure_is_contained() -> None:
    client_stream, server_stream = trio.testing.memory_stream_pair()
    seen: list[str] = []

    def explode(method: str, params: msgspec.Raw) -> None:
        seen.append(method)
        raise RuntimeError("callback bug")

    client = JsonRpcPeer(client_stream, on_notification=explode)
    server = RawEnd(server_stream)
    async with trio.open_nursery() as nursery:
        await nursery.start(client.run)
        await server.send({"jsonrpc": "2.0", "method": "one"})
        await server.send({"jsonrpc": "2.0", "method": "two", "params": {"x": 1}})
        await server.send(call(1, "nope"))
        with trio.fail_after(HANG_GUARD_SECONDS):
            assert (await server.receive())["id"] == 1
        nursery.cancel_scope.cancel()
    assert seen == ["one", "two"]


# -- a real Unix socket ----------------------------------------------------------------------


@pytest.mark.parametrize("framing", FRAMINGS)
async def test_open_connection_over_a_unix_socket(framing: Framing) -> None:
    with tempfile.TemporaryDirectory(prefix="rp-") as folder:
        path = Path(folder) / "s.sock"
        sock = trio.socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        await sock.bind(os.fspath(path))
        sock.listen()
        listener = trio.SocketListener(sock)
        events: list[str] = []

        async def serve_one() -> None:
            stream = await listener.accept()
            await JsonRpcPeer(stream, server_router()).run()

        with trio.fail_after(HANG_GUARD_SECONDS):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(serve_one)
                async with open_connection(
                    path, framing=framing, on_notification=lambda m, p: events.append(m)
                ) as peer:
                    info = await peer.request("session/get", {"sessionId": "u"}, result_type=Info)
                    assert info.message_count == 3
                    assert peer.framing == framing
                # leaving the block closed the connection: the server's peer finishes
            await listener.aclose()
        assert events == ["session/event"]


async def test_open_connection_to_nothing_raises_oserror() -> None:
    with tempfile.TemporaryDirectory(prefix="rp-") as folder, pytest.raises(FileNotFoundError):
        async with open_connection(Path(folder) / "absent.sock"):
            pass


# -- arbitrary input -------------------------------------------------------------------------

VALID = [
    encode_frame(msgspec.json.encode(call(1, "session/get", {"sessionId": "a"})), "ndjson"),
    encode_frame(msgspec.json.encode(call(2, "shape", {})), "content-length"),
    b'[{"jsonrpc":"2.0","method":"session/get","id":"z","params":{"sessionId":"q"}}]\n',
    b'{"jsonrpc":"2.0","method":"$/cancelRequest","params":{"id":1}}\n',
    b"Content-Length: 3\r\n\r\n[1]",
    b"\r\n",
]
CHUNKS = st.lists(st.sampled_from(VALID) | st.binary(max_size=40), max_size=6)


async def _feed_server(chunks: list[bytes]) -> list[bytes]:
    client_stream, server_stream = trio.testing.memory_stream_pair()
    peer = JsonRpcPeer(server_stream, server_router(), max_frame_bytes=128)
    raw = RawEnd(client_stream)
    frames: list[bytes] = []
    with trio.fail_after(HANG_GUARD_SECONDS):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(peer.run)
            try:
                for chunk in chunks:
                    await raw.send_bytes(chunk)
                await raw.send_eof()
            except trio.BrokenResourceError:
                pass  # the peer refused the framing and closed; its replies are still readable
            while (body := await raw.receive_frame()) is not None:
                frames.append(body)
    return frames


@settings(max_examples=150, deadline=None)
@given(CHUNKS)
def test_arbitrary_input_gets_only_well_formed_replies_then_the_peer_ends(
    chunks: list[bytes],
) -> None:
    for body in trio.run(_feed_server, chunks):
        value = msgspec.json.decode(body)
        for reply in value if isinstance(value, list) else [value]:
            assert reply["jsonrpc"] == "2.0"
            if "method" in reply:
                assert set(reply) == {"jsonrpc", "method", "params"}
            else:
                assert set(reply) in ({"jsonrpc", "id", "result"}, {"jsonrpc", "id", "error"})
