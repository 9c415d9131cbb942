"""Connecting to robotad: a `JsonRpcPeer` on the daemon's Unix socket (PROTOCOL.md §1).

    async with open_connection() as peer:
        info = await peer.request("session/get", {"sessionId": sid}, result_type=SessionInfo)

The connection's reader runs in a nursery of its own for the life of the ``async with`` block;
leaving the block closes the connection (cancelling the reader; requests still waiting fail with
`ConnectionLost`). If the daemon closes first, waiting requests fail with `ConnectionLost` and
the block's body keeps running until it leaves.

Connecting waits for a place when the daemon's backlog is full (`protocol.unix_connect`), as
the blocking client does: `trio.open_unix_socket` would hand back a socket that never
connected. connect(2) has no readiness to await, so that wait runs in a worker thread, which a
cancelled connect (Ctrl-C) abandons: the watcher is told the wait ended and hears nothing more
from the thread, whose wait stops at its next step (the bound, or the watcher's next call) and
which then closes the socket itself.
"""

from __future__ import annotations

import os
import socket
import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import trio

from protocol.framing import DEFAULT_MAX_FRAME_BYTES, Framing
from protocol.peer import JsonRpcPeer, NotificationCallback, Router
from protocol.socket_path import resolve_socket_path
from protocol.unix_connect import (
    CONNECT_TIMEOUT,
    ConnectWatcher,
    connect_at_once,
    wait_for_place,
)

__all__ = ["open_connection"]


@asynccontextmanager
async def open_connection(
    path: str | os.PathLike[str] | None = None,
    *,
    framing: Framing = "ndjson",
    connect_timeout: float | None = CONNECT_TIMEOUT,
    connect_watcher: ConnectWatcher | None = None,
    on_notification: NotificationCallback | None = None,
    router: Router | None = None,
    max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES,
) -> AsyncIterator[JsonRpcPeer]:
    """Connect to the daemon socket at `path` (resolved as PROTOCOL.md §1 says when None) and
    yield a running peer that frames its messages with `framing`.

    Raises `OSError` (e.g. `FileNotFoundError`, `ConnectionRefusedError`) when nothing listens
    there, and `TimeoutError` when the daemon's backlog stays full for `connect_timeout`
    seconds (None: no bound); `connect_watcher` is told about that wait, and may end it by
    raising (`protocol.unix_connect`). `on_notification` receives server notifications such as
    ``session/event``; `router` serves requests the server might send (none in protocol
    version 1).
    """
    address = os.fspath(resolve_socket_path(path))
    sock = await _connected(address, connect_timeout, connect_watcher)
    stream = trio.SocketStream(trio.socket.from_stdlib_socket(sock))
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


async def _connected(
    address: str, bound: float | None, watcher: ConnectWatcher | None
) -> socket.socket:
    """A Unix stream socket connected to `address`; a full backlog is waited for in a worker
    thread (see the module docstring), at most `bound` seconds."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    owned = True  # False once an abandoned thread closes it
    try:
        if not connect_at_once(sock, address):
            wait = _PlaceWait(sock, address, bound, watcher)
            try:
                await trio.to_thread.run_sync(wait.run, abandon_on_cancel=True)
            except BaseException:
                owned = not wait.abandon()
                raise
    except BaseException:
        if owned:
            sock.close()
        raise
    return sock


class _PlaceWait:
    """`wait_for_place` for a worker thread that trio may abandon: `abandon` ends what the
    thread tells `watcher` (the wait is over for it) and leaves the socket to the thread."""

    def __init__(
        self,
        sock: socket.socket,
        address: str,
        timeout: float | None,
        watcher: ConnectWatcher | None,
    ) -> None:
        self._sock = sock
        self._address = address
        self._timeout = timeout
        self._watcher = watcher
        self._lock = threading.Lock()
        self._abandoned = False
        self._done = False

    def run(self) -> None:
        """The wait, in the worker thread; closes the socket when it was abandoned."""
        try:
            wait_for_place(
                self._sock,
                self._address,
                timeout=self._timeout,
                watcher=None if self._watcher is None else self,
            )
        finally:
            with self._lock:
                self._done = True
                if self._abandoned:
                    self._sock.close()

    def abandon(self) -> bool:
        """Stop telling the watcher (it is told the wait ended); whether the thread still
        runs, and so closes the socket itself."""
        with self._lock:
            if self._done:
                return False
            self._abandoned = True
            if self._watcher is not None:
                self._watcher.ended()
            return True

    # -- the watcher, as the thread sees it ---------------------------------------------------

    def waiting(self, waited: float) -> float | None:
        with self._lock:
            if self._abandoned:
                raise _Abandoned
            assert self._watcher is not None
            return self._watcher.waiting(waited)

    def ended(self) -> None:
        with self._lock:
            if not self._abandoned and self._watcher is not None:
                self._watcher.ended()


class _Abandoned(Exception):
    """Ends an abandoned thread's wait; nobody is left to see it."""
