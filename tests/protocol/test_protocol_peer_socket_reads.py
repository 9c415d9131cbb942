"""The peer's read path over a real socket (docs/architecture.md decision 1).

On a socket stream the reader reads the socket itself: one wait for readability and one
``read`` when the remote waits for each reply, and one checkpoint after a read that found bytes
without waiting — so a remote that writes without pause cannot keep anything else from running.
The end of the stream and a closed socket end the connection as before.
"""

from __future__ import annotations

import socket

import trio

from protocol.peer import JsonRpcPeer
from tests.protocol.wire_harness import HANG_GUARD_SECONDS, ping_router

#: Requests a flooding client has written before the server reads any: they fit in the
#: socket's buffer, and so do their replies.
FLOOD = 500
#: Bytes the flooded peer reads at a time: a handful of requests.
SMALL_READS = 256
PING = b'{"jsonrpc":"2.0","id":1,"method":"ping"}\n'


def pair() -> tuple[trio.SocketStream, socket.socket]:
    """A trio stream for the peer, and the stdlib socket of the other end (non-blocking)."""
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    theirs.setblocking(False)
    return trio.SocketStream(trio.socket.from_stdlib_socket(ours)), theirs


def replies_waiting(end: socket.socket, seen: list[bytes]) -> int:
    """Every reply line readable on `end` now, counted with those read before."""
    while True:
        try:
            data = end.recv(1 << 16)
        except BlockingIOError:
            return b"".join(seen).count(b"\n")
        if not data:
            return b"".join(seen).count(b"\n")
        seen.append(data)


async def test_a_flooding_client_does_not_keep_other_tasks_from_running() -> None:
    """A client that wrote FLOOD requests at once: the peer answers them in small reads, and
    after each read that found bytes without waiting it lets the scheduler run the others —
    here, this test's task, which sees some replies while most are still unanswered."""
    stream, flooder = pair()
    flooder.sendall(PING * FLOOD)
    seen: list[bytes] = []
    with trio.fail_after(HANG_GUARD_SECONDS):
        async with trio.open_nursery() as nursery:
            peer = JsonRpcPeer(stream, ping_router(), receive_size=SMALL_READS)
            nursery.start_soon(peer.run)
            answered = 0
            while answered == 0:
                await trio.sleep(0)
                answered = replies_waiting(flooder, seen)
            assert answered < FLOOD // 2, "the reader read on without letting anything run"
            while answered < FLOOD:
                await trio.sleep(0)
                answered = replies_waiting(flooder, seen)
            nursery.cancel_scope.cancel()
    assert answered == FLOOD


async def test_each_request_of_a_waiting_client_is_answered() -> None:
    """The ping-pong exchange: every request written after the previous reply is answered."""
    stream, client = pair()
    seen: list[bytes] = []
    with trio.fail_after(HANG_GUARD_SECONDS):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(JsonRpcPeer(stream, ping_router()).run)
            for count in range(1, 51):
                client.sendall(PING)
                while replies_waiting(client, seen) < count:
                    await trio.sleep(0.001)
            nursery.cancel_scope.cancel()
    assert b"".join(seen).count(b'"result":{"pong":true}') == 50


async def test_the_end_of_the_stream_ends_the_connection() -> None:
    """A half-closed client: the request before the end is answered, then the peer returns."""
    stream, client = pair()
    client.sendall(PING)
    client.shutdown(socket.SHUT_WR)
    with trio.fail_after(HANG_GUARD_SECONDS):
        await JsonRpcPeer(stream, ping_router()).run()
    assert replies_waiting(client, []) == 1


async def test_a_socket_closed_under_the_reader_ends_the_connection() -> None:
    """Closing the peer's stream while its reader waits ends `run` instead of hanging."""
    stream, client = pair()
    with trio.fail_after(HANG_GUARD_SECONDS):
        async with trio.open_nursery() as nursery:
            peer = JsonRpcPeer(stream, ping_router())
            nursery.start_soon(peer.run)
            await trio.sleep(0.01)
            await stream.aclose()
    client.close()
