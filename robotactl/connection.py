"""Reaching robotad: connect to its socket, starting it first when nothing answers.

Two ways in, alike in every failure: `connect` yields a trio `JsonRpcPeer` (for the commands
that stream a turn's events and prompt for approvals), `connect_blocking` returns a trio-free
`BlockingClient` (for every one-shot command: importing trio costs more than the whole call).
When no daemon listens at the socket (the file is missing, or a stale file refuses
connections) and autostart is allowed, either has `robotactl.autostart` start one and waits
for it to report that it serves — never a sleep-and-retry loop — then connects. Starting is
trio code; `connect_blocking` runs it under ``trio.run`` only then, so a client that finds the
daemon serving never imports trio. Concurrent robotactl processes take turns starting (see
`robotactl.autostart.autostart_lock`), so only one daemon is ever started for them and all of
them connect to it.

A daemon that listens but whose backlog is full (it accepts none: stopped, stuck, swamped) is
waited for, not started again: the caller's `watch` (decision 82) is told about that wait and
ends it when it gives up.

Failures are `DaemonUnavailable` with a message written for a person: the socket it tried,
why nothing answered, and — when a started daemon gave up — what robotad printed (for example
the unsafe runtime directory it refused). Nothing here prints or exits; the CLI does.
"""

from __future__ import annotations

import errno
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from robotactl.daemon_errors import DaemonNotRunning, DaemonStartFailed, DaemonUnavailable

if TYPE_CHECKING:
    from protocol.blocking_client import BlockingClient
    from protocol.peer import JsonRpcPeer, NotificationCallback
    from protocol.unix_connect import ConnectWatcher

__all__ = [
    "READY_TIMEOUT",
    "DaemonNotRunning",
    "DaemonStartFailed",
    "DaemonUnavailable",
    "connect",
    "connect_blocking",
    "status_answered",
    "why_closed",
]

#: A connection of either kind, as `_start_unless_served` hands it back.
C = TypeVar("C")

#: Seconds a freshly started robotad has to report that it serves.
READY_TIMEOUT = 10.0
#: The longest path connect(2) takes for a Unix socket (``sizeof(sun_path) - 1`` on Linux).
_MAX_SOCKET_PATH_BYTES = 107
#: connect(2) errors meaning "nobody is listening there", as opposed to "not allowed".
_NOBODY_LISTENING = frozenset({errno.ENOENT, errno.ECONNREFUSED})


@asynccontextmanager
async def connect(
    socket_path: Path,
    *,
    autostart: bool,
    ready_timeout: float = READY_TIMEOUT,
    on_notification: NotificationCallback | None = None,
    watch: ConnectWatcher | None = None,
) -> AsyncIterator[JsonRpcPeer]:
    """A connected peer for the daemon at `socket_path`, closed when the block exits.

    With `autostart`, a missing daemon is started and connected to once ready.
    `on_notification` receives the daemon's notifications (``session/event``). `watch` is
    told about each wait for a place in the daemon's full backlog, and bounds it by raising
    (`robotactl.unanswered.ConnectWatch`: what it raises propagates); without one, such a wait
    lasts at most `protocol.unix_connect.CONNECT_TIMEOUT`. Raises `DaemonNotRunning` when
    nothing listens and `autostart` is false, `DaemonStartFailed` when a started daemon gave
    up or timed out, and `DaemonUnavailable` for any other reason the socket cannot be reached
    (permissions, a path too long, a backlog full for that long).
    """
    async with AsyncExitStack() as stack:

        async def probe() -> JsonRpcPeer | None:
            return await _try_connect(stack, socket_path, on_notification, watch)

        peer = await probe()
        if peer is None:
            if not autostart:
                raise DaemonNotRunning(socket_path)
            peer = await _start_unless_served(socket_path, ready_timeout, probe)
        yield peer


def connect_blocking(
    socket_path: Path,
    *,
    autostart: bool,
    timeout: float | None,
    ready_timeout: float = READY_TIMEOUT,
    watch: ConnectWatcher | None = None,
) -> BlockingClient:
    """A connected `BlockingClient` for the daemon at `socket_path`, whose requests wait at
    most `timeout` seconds by default (None: no bound); the caller closes it (``with``).

    Connects and fails exactly as `connect` does, `watch` too. Only a missing daemon with
    `autostart` imports trio, to start it (see the module docstring).
    """
    client = _try_connect_blocking(socket_path, timeout, watch)
    if client is not None:
        return client
    if not autostart:
        raise DaemonNotRunning(socket_path)
    import trio

    async def probe() -> BlockingClient | None:
        # A Unix connect(2) completes (or fails) at once unless the backlog is full, which a
        # daemon that has just started serving does not have: nothing here waits on the loop.
        return _try_connect_blocking(socket_path, timeout, watch)

    return trio.run(_start_unless_served, socket_path, ready_timeout, probe)


async def _start_unless_served(
    socket_path: Path, ready_timeout: float, probe: Callable[[], Awaitable[C | None]]
) -> C:
    """Start robotad under the autostart lock unless `probe` finds one serving meanwhile;
    return what `probe` connects once it serves."""
    # Imported here: only a client that found no daemon pays for it.
    from protocol.instance_lock import LOCK_NAME, PREDECESSOR_WAIT, shutting_down
    from robotactl.autostart import autostart_lock, start_daemon

    if shutting_down(socket_path.parent / LOCK_NAME):
        # A daemon is shutting down there (its socket is gone, its lock still held): the one
        # started now waits for it to exit before it serves.
        ready_timeout += PREDECESSOR_WAIT
    async with autostart_lock(socket_path, lock_timeout=2 * ready_timeout):
        # Whoever held the lock before us may have started it already.
        connection = await probe()
        if connection is not None:
            return connection
        try:
            await start_daemon(socket_path, ready_timeout=ready_timeout)
        except DaemonStartFailed:
            # A daemon started by other means (by hand, by systemd) at the same moment wins
            # the daemon's own lock and ours exits; use the winner if it is there.
            connection = await probe()
            if connection is None:
                raise
            return connection
        connection = await probe()
        if connection is None:
            raise DaemonStartFailed(
                f"robotad reported ready but nothing answers at {socket_path}", socket_path
            )
        return connection


async def _try_connect(
    stack: AsyncExitStack,
    socket_path: Path,
    on_notification: NotificationCallback | None,
    watch: ConnectWatcher | None,
) -> JsonRpcPeer | None:
    """A connected peer (closed by `stack`), or None when nobody listens at `socket_path`."""
    from protocol.client import open_connection

    try:
        return await stack.enter_async_context(
            open_connection(
                socket_path,
                on_notification=on_notification,
                connect_timeout=_connect_timeout(watch),
                connect_watcher=watch,
            )
        )
    except OSError as exc:
        _unless_nobody_listens(exc, socket_path)
        return None


def _try_connect_blocking(
    socket_path: Path, timeout: float | None, watch: ConnectWatcher | None
) -> BlockingClient | None:
    """A connected blocking client, or None when nobody listens at `socket_path`."""
    from protocol.blocking_client import open_blocking_connection

    try:
        return open_blocking_connection(
            socket_path,
            timeout=timeout,
            connect_timeout=_connect_timeout(watch),
            connect_watcher=watch,
        )
    except OSError as exc:
        _unless_nobody_listens(exc, socket_path)
        return None


def _connect_timeout(watch: ConnectWatcher | None) -> float | None:
    """The bound of a wait for a place in a full backlog: the watch's own, else the
    protocol's."""
    from protocol.unix_connect import CONNECT_TIMEOUT

    return None if watch is not None else CONNECT_TIMEOUT


def _unless_nobody_listens(exc: OSError, socket_path: Path) -> None:
    """Return when connect(2) failed with `exc` because nobody listens at `socket_path`;
    raise `DaemonUnavailable` (with the reason, for a person) for any other failure."""
    if exc.errno in _NOBODY_LISTENING:
        return
    import os

    reason = exc.strerror or str(exc)
    size = len(os.fsencode(socket_path))
    if exc.errno is None and size > _MAX_SOCKET_PATH_BYTES:  # "AF_UNIX path too long"
        reason = (
            f"the path is {size} bytes long; Unix sockets allow at most "
            f"{_MAX_SOCKET_PATH_BYTES} (choose a shorter --socket or ROBOTA_SOCKET)"
        )
    raise DaemonUnavailable(
        f"cannot connect to robotad at {socket_path}: {reason}", socket_path
    ) from exc


def why_closed(path: Path, detail: str) -> str:
    """What a connection closed before the answer most likely means, said plainly: robotad
    stopped (nothing listens now), a socket owned by another user (its daemon refuses us), or
    it is shutting down; with where its log is."""
    import os

    said = f"robotad at {path} closed the connection before answering ({detail})"
    try:
        owner = os.stat(path).st_uid
    except OSError:
        owner = None
    if owner is not None and owner != os.getuid():
        return f"{said}: the socket belongs to another user, whose robotad refuses you"
    # A dying process may close our connection before its listener: only an answer proves a
    # daemon is there.
    answered = status_answered(path, 2.0) is True
    state = "it is shutting down or restarting" if answered else "robotad has stopped"
    return (
        f"{said}; {state}. Its log says why: `journalctl --user -u robotad` under systemd, "
        f"else {path.parent / 'robotad.log'} when robotactl started it"
    )


def status_answered(path: Path, timeout: float) -> bool | None:
    """Whether robotad answers ``daemon/status`` on a connection of its own to `path` within
    `timeout` seconds: True when it sends anything back, False when it stays silent (or the
    connection fails), None when nobody listens there (no socket, or refused)."""
    import socket

    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        probe.settimeout(timeout)
        probe.connect(str(path))
        probe.sendall(b'{"jsonrpc":"2.0","id":0,"method":"daemon/status"}\n')
        return bool(probe.recv(1))
    except OSError as exc:
        return None if exc.errno in _NOBODY_LISTENING else False
    finally:
        probe.close()
