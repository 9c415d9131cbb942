"""The peer's write fast path over a real socket (docs/architecture.md decision 1).

When the write lock is free, a frame the socket takes whole goes out in one non-blocking
write, with no ``send_all``; the rest of a frame the socket did not take goes through the
shielded ``send_all`` under the lock. The guarantees stay: frames whole and in order, a
cancelled writer never tears one, a writer other than the reader still passes a checkpoint.
"""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
import trio
import trio.testing

from protocol.errors import InvalidRequest
from protocol.jsonrpc import ConnectionLost
from protocol.peer import CallContext, JsonRpcPeer, Router
from tests.protocol.wire_harness import HANG_GUARD_SECONDS, Empty, RawEnd, call, ping_router

#: Bytes of the large frames: far more than a Unix socket buffers, so writes must wait.
BIG = 1024 * 1024


def router() -> Router:
    routes = ping_router()

    @routes.method("big", Empty, inline=True)
    async def big(params: Empty, ctx: CallContext) -> dict[str, Any]:
        return {"pad": "b" * BIG}

    return routes


class SendAllCounter:
    """Counts `trio.SocketStream.send_all` calls on the server's stream."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.calls = 0
        self.stream: trio.SocketStream | None = None
        original = trio.SocketStream.send_all

        async def counting(stream: trio.SocketStream, data: Any) -> None:
            if stream is self.stream:
                self.calls += 1
            await original(stream, data)

        monkeypatch.setattr(trio.SocketStream, "send_all", counting)


@pytest.fixture
def counter(monkeypatch: pytest.MonkeyPatch) -> SendAllCounter:
    return SendAllCounter(monkeypatch)


@asynccontextmanager
async def socket_peer(counter: SendAllCounter) -> AsyncIterator[tuple[JsonRpcPeer, RawEnd]]:
    """A peer serving `router()` on one end of a Unix socket pair; the raw other end."""
    ours, theirs = trio.socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    ours.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
    server_stream = trio.SocketStream(ours)
    counter.stream = server_stream
    peer = JsonRpcPeer(server_stream, router())
    with trio.fail_after(HANG_GUARD_SECONDS):
        async with trio.open_nursery() as nursery:
            await nursery.start(peer.run)
            client = RawEnd(trio.SocketStream(theirs))
            yield peer, client
            nursery.cancel_scope.cancel()


async def test_a_small_reply_goes_out_in_one_write_without_send_all(
    counter: SendAllCounter,
) -> None:
    async with socket_peer(counter) as (_, client):
        for request_id in range(3):
            await client.send(call(request_id, "ping"))
            assert await client.receive() == {
                "jsonrpc": "2.0",
                "id": request_id,
                "result": {"pong": True},
            }
    assert counter.calls == 0


async def test_what_the_socket_does_not_take_is_finished_whole_and_in_order(
    counter: SendAllCounter,
) -> None:
    async with socket_peer(counter) as (_, client):
        await client.send(call(1, "big"))
        await client.send(call(2, "ping"))
        first = await client.receive()
        second = await client.receive()
    assert first["id"] == 1
    assert first["result"]["pad"] == "b" * BIG
    assert second == {"jsonrpc": "2.0", "id": 2, "result": {"pong": True}}
    assert counter.calls == 1  # the rest of the big reply; the small one took the fast path


async def test_concurrent_writers_never_interleave_over_a_socket(
    counter: SendAllCounter,
) -> None:
    async with socket_peer(counter) as (peer, client):

        async def shout(index: int) -> None:
            await peer.notify("note", {"index": index, "pad": str(index) * (BIG // 8)})

        async with trio.open_nursery() as nursery:
            for index in range(6):
                nursery.start_soon(shout, index)
            seen = [await client.receive() for _ in range(6)]
    assert sorted(m["params"]["index"] for m in seen) == list(range(6))
    assert all(m["params"]["pad"] == str(m["params"]["index"]) * (BIG // 8) for m in seen)
    assert counter.calls >= 1


async def test_a_cancelled_writer_never_tears_its_frame_over_a_socket(
    counter: SendAllCounter,
) -> None:
    async with socket_peer(counter) as (peer, client):
        scope = trio.CancelScope()
        finished = trio.Event()

        async def writer() -> None:
            with scope:
                await peer.notify("big", {"pad": "y" * BIG})
            finished.set()

        async with trio.open_nursery() as nursery:
            nursery.start_soon(writer)
            await trio.testing.wait_all_tasks_blocked()  # stuck: nobody reads the other end
            scope.cancel()
            await trio.testing.wait_all_tasks_blocked()
            assert not finished.is_set()  # the shielded rest of the frame still waits
            nursery.start_soon(peer.notify, "after", {})
            first = await client.receive()
            assert first["params"] == {"pad": "y" * BIG}
            assert (await client.receive())["method"] == "after"


async def test_a_writer_other_than_the_reader_passes_a_checkpoint(
    counter: SendAllCounter,
) -> None:
    async with socket_peer(counter) as (peer, client):
        with trio.testing.assert_checkpoints():
            await peer.notify("note", {})
        assert (await client.receive())["method"] == "note"
    assert counter.calls == 0


async def test_a_notification_told_not_to_checkpoint_passes_none_when_the_socket_takes_it(
    counter: SendAllCounter,
) -> None:
    """``notify(..., checkpoint=False)`` (for a delivery loop that waits next anyway): a frame
    the socket takes at once passes no schedule point, so an event costs the loop one round."""
    steps = StepCounter(trio.lowlevel.current_task())
    trio.lowlevel.add_instrument(steps)
    try:
        async with socket_peer(counter) as (peer, client):
            before = steps.count
            await peer.notify("note", {}, checkpoint=False)
            assert steps.count == before  # the task never gave the loop a round
            await peer.notify("again", {})
            assert steps.count == before + 1  # the usual checkpoint: one round
            assert (await client.receive())["method"] == "note"
    finally:
        trio.lowlevel.remove_instrument(steps)
    assert counter.calls == 0


class StepCounter(trio.abc.Instrument):
    """Counts the times the scheduler resumes one task (each follows a schedule point)."""

    def __init__(self, task: trio.lowlevel.Task) -> None:
        self.task = task
        self.count = 0

    def before_task_step(self, task: trio.lowlevel.Task) -> None:
        if task is self.task:
            self.count += 1


# -- a refusal that comes before the remote closes mid-write -----------------------------------

#: What a server answers a frame over its size limit, before it closes (PROTOCOL §1).
REFUSAL = (
    b'{"jsonrpc":"2.0","id":null,"error":{"code":-32600,'
    b'"message":"invalid request: frame larger than 4096 bytes","data":{"limit":4096}}}\n'
)


def refusing_remote() -> tuple[trio.socket.SocketType, socket.socket]:
    """Our end of a socket pair whose other end has already read a little, refused it as a
    server refuses a frame over its limit, and closed."""
    ours, theirs = trio.socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    theirs_blocking = socket.socket(fileno=theirs.detach())
    theirs_blocking.sendall(REFUSAL)
    return ours, theirs_blocking


@pytest.mark.parametrize("reading", [True, False], ids=["reader-running", "reader-idle"])
async def test_a_request_the_remote_refused_mid_write_raises_that_refusal(reading: bool) -> None:
    """A request larger than the socket buffers: the remote refuses it (-32600, no id) and
    closes while it is still being written. The write fails; the caller gets the refusal the
    remote sent (read by the reader first, or still unread in the socket), not
    `ConnectionLost`, which robotactl said as "robotad is shutting down or restarting"."""
    ours, theirs = refusing_remote()
    peer = JsonRpcPeer(trio.SocketStream(ours), framing="ndjson")
    with trio.fail_after(HANG_GUARD_SECONDS):
        async with trio.open_nursery() as nursery:
            if reading:
                await nursery.start(peer.run)
            theirs.close()
            with pytest.raises(InvalidRequest) as refused:
                await peer.request("session/run", {"prompt": "x" * (4 * BIG)})
            nursery.cancel_scope.cancel()
    assert refused.value.data == {"limit": 4096}


async def test_a_remote_that_closes_mid_write_without_a_word_is_connection_lost() -> None:
    ours, theirs = trio.socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    peer = JsonRpcPeer(trio.SocketStream(ours), framing="ndjson")
    theirs.close()
    with trio.fail_after(HANG_GUARD_SECONDS), pytest.raises(ConnectionLost):
        await peer.request("session/run", {"prompt": "x" * (4 * BIG)})


# -- a remote that reads nothing of what it asked for -------------------------------------------

#: Bytes of one reply in the flood below.
REPLY = 64 * 1024


async def test_a_remote_that_sends_requests_and_reads_no_reply_is_cut_off() -> None:
    """Replies of spawned requests wait for a full socket, each in its own task: a client that
    sent requests and read none of the replies made the peer hold every one of them (the
    daemon grew a megabyte an export, without bound). Past `max_queued_bytes` the connection
    closes, and what waited is freed."""
    routes = Router()

    @routes.method("blob", Empty)
    async def blob(params: Empty, ctx: CallContext) -> dict[str, Any]:
        return {"pad": "z" * REPLY}

    ours, theirs = trio.socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    peer = JsonRpcPeer(trio.SocketStream(ours), routes, max_queued_bytes=16 * REPLY)
    client = RawEnd(trio.SocketStream(theirs))
    async with trio.open_nursery() as nursery:
        nursery.start_soon(peer.run)
        await client.send_bytes(
            b"".join(b'{"jsonrpc":"2.0","id":%d,"method":"blob"}\n' % n for n in range(200))
        )
        with trio.move_on_after(HANG_GUARD_SECONDS):
            await peer.wait_finished()  # never read: cut off, not held
        cut_off = peer.closed
        await peer.aclose()  # (the shielded writes of a peer still holding them end here)
    theirs.close()
    assert cut_off


async def test_one_reply_larger_than_the_queue_bound_still_waits_for_a_reader() -> None:
    """The bound is for a flood: a frame waiting alone (a long session's export behind an
    event being written) is sent whatever its size, to a client that reads."""
    routes = ping_router()

    @routes.method("large", Empty)
    async def large(params: Empty, ctx: CallContext) -> dict[str, Any]:
        return {"pad": "l" * (4 * REPLY)}

    ours, theirs = trio.socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    ours.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
    peer = JsonRpcPeer(trio.SocketStream(ours), routes, max_queued_bytes=REPLY)
    client = RawEnd(trio.SocketStream(theirs))
    with trio.fail_after(HANG_GUARD_SECONDS):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(peer.run)
            nursery.start_soon(peer.notify, "event", {"pad": "e" * REPLY})  # holds the lock
            await trio.testing.wait_all_tasks_blocked()
            await client.send(call(1, "large"))
            assert (await client.receive())["method"] == "event"
            reply = await client.receive()
            nursery.cancel_scope.cancel()
    assert reply["result"] == {"pad": "l" * (4 * REPLY)}


def blob_router() -> Router:
    """`blob` answers REPLY bytes in a task of its own, `inline_blob` in the reader."""
    routes = ping_router()

    @routes.method("blob", Empty)
    async def blob(params: Empty, ctx: CallContext) -> dict[str, Any]:
        return {"pad": "z" * REPLY}

    @routes.method("inline_blob", Empty, inline=True)
    async def inline_blob(params: Empty, ctx: CallContext) -> dict[str, Any]:
        return {"pad": "i" * REPLY}

    return routes


def batch_of(method: str, count: int) -> list[dict[str, Any]]:
    return [call(n, method) for n in range(count)]


@pytest.mark.parametrize("method", ["blob", "inline_blob"])
async def test_a_batch_whose_replies_pass_the_queue_bound_is_cut_off(method: str) -> None:
    """Decision 50 bounds what waits for one connection, but a batch's replies were held,
    until the last came, without being counted: a batch of 1,000 requests held all their
    replies whatever they weighed. Each reply held now counts; the one that would pass the
    bound closes the connection (nothing of the batch is answered), as a flood of single
    replies does."""
    ours, theirs = trio.socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    peer = JsonRpcPeer(trio.SocketStream(ours), blob_router(), max_queued_bytes=4 * REPLY)
    client = RawEnd(trio.SocketStream(theirs))
    with trio.fail_after(HANG_GUARD_SECONDS):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(peer.run)
            await client.send(batch_of(method, 8))  # 8 replies of REPLY bytes: past 4 * REPLY
            await client.expect_eof()
            await peer.wait_finished()
    assert peer.closed
    theirs.close()


@pytest.mark.parametrize("method", ["blob", "inline_blob"])
async def test_a_batch_under_the_queue_bound_is_answered_whole(method: str) -> None:
    """The other side of the bound: a batch whose replies together stay under it gets one
    array holding every reply, and the connection serves on (what the batch held no longer
    counts once its array went out)."""
    ours, theirs = trio.socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    peer = JsonRpcPeer(trio.SocketStream(ours), blob_router(), max_queued_bytes=4 * REPLY)
    client = RawEnd(trio.SocketStream(theirs))
    with trio.fail_after(HANG_GUARD_SECONDS):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(peer.run)
            for _ in range(3):  # each batch alone is under the bound; together they are not
                await client.send(batch_of(method, 3))
                replies = await client.receive()
                assert sorted(reply["id"] for reply in replies) == [0, 1, 2]
                assert all(len(reply["result"]["pad"]) == REPLY for reply in replies)
            await client.send(call(9, "ping"))
            assert (await client.receive())["id"] == 9
            assert not peer.closed
            nursery.cancel_scope.cancel()
    theirs.close()
