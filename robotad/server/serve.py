"""The socket server: accept loop, one JSON-RPC peer per connection, graceful shutdown.

`Server.run` serves a `Listener` until `request_shutdown` is called, then shuts down in order:

1. **stop accepting** — `on_stopping` is called (the daemon marks its lock: a daemon started
   from now on waits for this one to exit), the accept loop is cancelled, the listening socket
   closed and (if we bound it) its file unlinked, so a new client fails fast instead of
   queueing for a dying daemon; ``STOPPING=1`` goes to the service manager;
2. **drain the application** — ``app.on_shutdown(grace)`` runs while every open connection is
   still served, so a client waiting on a turn hears its outcome; it is cancelled if it overruns
   ``grace + margin``;
3. **close connections gracefully** — each connection's read side is shut down; its peer sees
   end-of-stream, answers every request it already read (the half-close rule of PROTOCOL.md §2)
   and returns; whatever is still open after ``flush_timeout`` is closed outright (which also
   frees a reply write stuck on a client that does not read).

`force_shutdown` (a second SIGTERM/SIGINT) skips whatever is left of steps 2 and 3.

Connections and the accept loop live in separate nurseries, the listener's inside the
connections', so stopping the accept loop never touches a connection. A connection whose peer
uid differs from ours is closed before any byte is read. A failure inside one connection is
logged and ends that connection only; `trio.Cancelled` always propagates.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import socket
from collections.abc import Callable
from typing import Final

import trio

from protocol.framing import DEFAULT_MAX_FRAME_BYTES
from protocol.peer import JsonRpcPeer
from robotad.log import fields
from robotad.server.app import Application
from robotad.server.listener import Listener
from robotad.server.notify import Notifier
from robotad.server.peercred import PeerCredentials, peer_credentials

__all__ = ["DEFAULT_FLUSH_TIMEOUT", "DEFAULT_HOOK_MARGIN", "Server"]

log = logging.getLogger("robotad.server")

#: How long connections get to flush replies once the application has drained.
DEFAULT_FLUSH_TIMEOUT: Final = 2.0
#: Extra time the application's shutdown hook gets beyond the grace (to persist sessions).
DEFAULT_HOOK_MARGIN: Final = 10.0

# accept(2) errors that mean "out of resources right now": wait and try again rather than die.
_CAPACITY_ERRNOS: Final = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOMEM, errno.ENOBUFS})
_CAPACITY_BACKOFF: Final = 0.1


class _Connection:
    """One accepted client: its stream and how to ask its peer to wind down."""

    def __init__(self, stream: trio.SocketStream, credentials: PeerCredentials) -> None:
        self.stream = stream
        self.credentials = credentials
        self.peer: JsonRpcPeer | None = None

    def stop_reading(self) -> None:
        """Shut down the read side: the peer sees end-of-stream after what is already queued.

        The client's further writes fail (EPIPE); replies can still be written.
        """
        with contextlib.suppress(OSError):  # already gone: the peer notices on its own
            self.stream.socket.shutdown(socket.SHUT_RD)

    async def close_now(self) -> None:
        """Close at once, also ending a reply write stuck on a client that does not read."""
        if self.peer is not None:
            await self.peer.aclose()
        else:
            await trio.aclose_forcefully(self.stream)


class Server:
    """Serves one listener with the application's router until asked to shut down.

    The server does not own `listener` beyond closing it when it stops accepting; the caller
    keeps the instance lock. `notifier` (optional) is told ``STOPPING=1`` when shutdown begins;
    `on_stopping` (optional, must not block or raise) is called once, just before the socket
    file goes.
    """

    def __init__(
        self,
        listener: Listener,
        app: Application,
        *,
        max_message_bytes: int = DEFAULT_MAX_FRAME_BYTES,
        notifier: Notifier | None = None,
        flush_timeout: float = DEFAULT_FLUSH_TIMEOUT,
        hook_margin: float = DEFAULT_HOOK_MARGIN,
        on_stopping: Callable[[], None] | None = None,
    ) -> None:
        self.listener = listener
        self.app = app
        self.max_message_bytes = max_message_bytes
        self.notifier = notifier or Notifier(None)
        self.flush_timeout = flush_timeout
        self.hook_margin = hook_margin
        self.on_stopping = on_stopping
        self._uid = os.geteuid()
        self._connections: set[_Connection] = set()
        self._shutdown_requested = trio.Event()
        self._all_closed = trio.Event()
        self._grace: float = 0.0
        self._stopping = False
        self._force_scope: trio.CancelScope | None = None
        self._forced = False

    # -- control ----------------------------------------------------------------------------

    @property
    def shutting_down(self) -> bool:
        return self._shutdown_requested.is_set()

    @property
    def connection_count(self) -> int:
        return len(self._connections)

    def request_shutdown(self, grace: float) -> None:
        """Begin a graceful shutdown giving running turns `grace` seconds. Idempotent: a later
        request while one is under way changes nothing. Returns at once."""
        if self._shutdown_requested.is_set():
            return
        self._grace = max(0.0, grace)
        self._shutdown_requested.set()

    def force_shutdown(self) -> None:
        """Cut the graceful shutdown short: stop draining and close every connection now."""
        self._forced = True
        self.request_shutdown(0.0)
        if self._force_scope is not None:
            self._force_scope.cancel()

    # -- serving ----------------------------------------------------------------------------

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Accept and serve until a shutdown completes. `task_status.started()` once accepting.

        Returns after the shutdown sequence (see the module docstring). When cancelled from
        outside, connections are torn down at once; the socket file is removed either way.
        """
        trio_listener = trio.SocketListener(trio.socket.from_stdlib_socket(self.listener.sock))
        try:
            async with trio.open_nursery() as connections:
                try:
                    async with trio.open_nursery() as accepting:
                        accepting.start_soon(self._accept_loop, trio_listener, connections)
                        task_status.started()
                        await self._shutdown_requested.wait()
                        accepting.cancel_scope.cancel()
                finally:
                    self._stop_accepting(trio_listener)
                await self._drain()
                connections.cancel_scope.cancel()
        finally:
            self._stop_accepting(trio_listener)

    def _stop_accepting(self, trio_listener: trio.SocketListener) -> None:
        if self._stopping:
            return
        self._stopping = True
        if self.on_stopping is not None:
            self.on_stopping()
        self.listener.remove_socket_file()
        trio_listener.socket.close()
        self.notifier.stopping("shutting down")
        log.info("stopped accepting connections", extra=fields(open=len(self._connections)))

    async def _drain(self) -> None:
        grace = self._grace
        with trio.CancelScope() as force_scope:
            self._force_scope = force_scope
            if self._forced:
                force_scope.cancel()
            with trio.move_on_after(grace + self.hook_margin) as hook_deadline:
                try:
                    await self.app.on_shutdown(grace)
                except Exception:
                    log.exception("application shutdown hook failed")
            if hook_deadline.cancelled_caught:
                log.warning(
                    "application shutdown overran its deadline",
                    extra=fields(grace=grace, margin=self.hook_margin),
                )
            for connection in list(self._connections):
                connection.stop_reading()
            if self._connections:
                with trio.move_on_after(self.flush_timeout):
                    await self._all_closed.wait()
        self._force_scope = None
        if self._connections:
            log.info("closing remaining connections", extra=fields(open=len(self._connections)))
        for connection in list(self._connections):
            await connection.close_now()

    async def _accept_loop(
        self, trio_listener: trio.SocketListener, connections: trio.Nursery
    ) -> None:
        while True:
            try:
                stream = await trio_listener.accept()
            except OSError as exc:
                if exc.errno not in _CAPACITY_ERRNOS:
                    raise
                log.error(
                    "cannot accept a connection: %s; retrying shortly",
                    os.strerror(exc.errno or 0),
                )
                await trio.sleep(_CAPACITY_BACKOFF)
                continue
            connections.start_soon(self._serve_connection, stream)

    async def _serve_connection(self, stream: trio.SocketStream) -> None:
        try:
            credentials = peer_credentials(stream.socket)
        except OSError:
            await trio.aclose_forcefully(stream)
            return
        if not credentials.is_same_user(self._uid):
            log.warning(
                "refused a connection from another user",
                extra=fields(peer_pid=credentials.pid, peer_uid=credentials.uid),
            )
            await trio.aclose_forcefully(stream)
            return
        connection = _Connection(stream, credentials)
        self._connections.add(connection)
        if self._stopping:
            connection.stop_reading()
        log.debug("connection opened", extra=fields(peer_pid=credentials.pid))
        try:
            connection.peer = JsonRpcPeer(
                stream, self.app.router, max_frame_bytes=self.max_message_bytes
            )
            await connection.peer.run()
        except Exception:
            log.exception("connection failed", extra=fields(peer_pid=credentials.pid))
        finally:
            # Bookkeeping first: the close below is a checkpoint, and under cancellation
            # nothing after a checkpoint runs.
            self._connections.discard(connection)
            if self._stopping and not self._connections:
                self._all_closed.set()
            log.debug("connection closed", extra=fields(peer_pid=credentials.pid))
            await trio.aclose_forcefully(stream)
