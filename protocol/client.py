"""Connecting to robotad: a `JsonRpcPeer` on the daemon's Unix socket (PROTOCOL.md §1).

    async with open_connection() as peer:
        info = await peer.request("session/get", {"sessionId": sid}, result_type=SessionInfo)

The connection's reader runs in a nursery of its own for the life of the ``async with`` block;
leaving the block closes the connection (cancelling the reader; requests still waiting fail with
`ConnectionLost`). If the daemon closes first, waiting requests fail with `ConnectionLost` and
the block's body keeps running until it leaves.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import trio

from protocol.framing import DEFAULT_MAX_FRAME_BYTES, Framing
from protocol.peer import JsonRpcPeer, NotificationCallback, Router
from protocol.socket_path import resolve_socket_path

__all__ = ["open_connection"]


@asynccontextmanager
async def open_connection(
    path: str | os.PathLike[str] | None = None,
    *,
    framing: Framing = "ndjson",
    on_notification: NotificationCallback | None = None,
    router: Router | None = None,
    max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES,
) -> AsyncIterator[JsonRpcPeer]:
    """Connect to the daemon socket at `path` (resolved as PROTOCOL.md §1 says when None) and
    yield a running peer that frames its messages with `framing`.

    Raises `OSError` (e.g. `FileNotFoundError`, `ConnectionRefusedError`) when nothing listens
    there. `on_notification` receives server notifications such as ``session/event``; `router`
    serves requests the server might send (none in protocol version 1).
    """
    stream = await trio.open_unix_socket(os.fspath(resolve_socket_path(path)))
    peer = JsonRpcPeer(
        stream,
        router,
        framing=framing,
        on_notification=on_notification,
        max_frame_bytes=max_frame_bytes,
    )
    async with trio.open_nursery() as nursery:
        await nursery.start(peer.run)
        try:
            yield peer
        finally:
            await peer.aclose()
