"""connect(2) to the daemon's Unix socket when its backlog may be full: bounded, and watched.

A Unix listener keeps the connections it has not accepted yet in its backlog. When that is
full — the daemon accepts too slowly, or not at all (stopped, stuck) — a blocking connect waits
until a place frees up, and a non-blocking one fails at once with EAGAIN. A Python socket
timeout makes the connect non-blocking, and trio's connect takes that EAGAIN for a connect in
progress and hands back a socket that never connected. A busy daemon deserves the wait, so:

- `connect_at_once` tries without waiting: connected (True), the backlog full (False), or the
  `OSError` connect(2) reports (`FileNotFoundError`, `ConnectionRefusedError`: nothing listens
  there; `PermissionError`).
- `wait_for_place` then waits in blocking mode, as long as `timeout` (None: no bound) and its
  `ConnectWatcher` let it, each step bounded by the kernel's send timeout (``SO_SNDTIMEO``,
  which bounds connect(2) too). The watcher is told how long the connect has waited, first at
  once and then as often as it asks, and that the wait ended, however it ended: what a person
  is shown meanwhile, and when to give up on the daemon, are the caller's decision, as they are
  for a request's reply (`protocol.blocking_client.WaitWatcher`). An exception it raises ends
  the wait and propagates.

`connect_unix` is the two in a row, for `protocol.blocking_client`; `protocol.client` runs
`wait_for_place` in a worker thread, since connect(2) has no readiness a loop could await.
Nothing here closes the socket; this module never imports trio.
"""

from __future__ import annotations

import errno
import socket
import struct
import time
from typing import Final, Protocol

__all__ = ["CONNECT_TIMEOUT", "ConnectWatcher", "connect_at_once", "connect_unix", "wait_for_place"]

#: Seconds a connect waits for a place in a full backlog unless its caller says otherwise.
CONNECT_TIMEOUT: Final = 10.0


class ConnectWatcher(Protocol):
    """Told about a connect's wait for a place in the daemon's full backlog."""

    def waiting(self, waited: float) -> float | None:
        """The connect has waited `waited` seconds so far: 0 when it starts waiting, then
        after each delay this returns (None: not again). May raise, to end the wait."""
        ...

    def ended(self) -> None:
        """The wait that `waiting` was told about ended, however it ended."""
        ...


def connect_unix(
    sock: socket.socket,
    address: str,
    *,
    timeout: float | None = CONNECT_TIMEOUT,
    watcher: ConnectWatcher | None = None,
) -> None:
    """Connect the ``AF_UNIX`` stream socket `sock` to `address`, waiting for a place in a
    full backlog as `wait_for_place` does. Raises what `connect_at_once` and `wait_for_place`
    raise; `sock` is left in blocking mode."""
    if not connect_at_once(sock, address):
        wait_for_place(sock, address, timeout=timeout, watcher=watcher)
    sock.settimeout(None)


def connect_at_once(sock: socket.socket, address: str) -> bool:
    """Connect `sock` to `address` without waiting; False when the backlog is full (a Unix
    connect(2) never stays in progress). `sock` is left non-blocking."""
    sock.setblocking(False)
    try:
        sock.connect(address)
    except BlockingIOError:
        return False
    return True


def wait_for_place(
    sock: socket.socket,
    address: str,
    *,
    timeout: float | None,
    watcher: ConnectWatcher | None,
) -> None:
    """Connect `sock` to `address`, waiting while the backlog is full: at most `timeout`
    seconds (None: no bound), then `TimeoutError` (``ETIMEDOUT``); and as long as `watcher`
    (if any) lets it. Raises connect(2)'s other errors as `connect_at_once` does."""
    started = time.monotonic()
    deadline = None if timeout is None else started + timeout
    wake = None if watcher is None else _next_wake(watcher, started, 0.0)
    sock.settimeout(None)  # blocking: a non-blocking connect would fail at once again
    try:
        while True:
            now = time.monotonic()
            if deadline is not None and now >= deadline:
                raise TimeoutError(
                    errno.ETIMEDOUT, f"the daemon accepted no connection within {timeout:g} s"
                )
            if watcher is not None and wake is not None and now >= wake:
                wake = _next_wake(watcher, started, now - started)
                continue
            step = min((t for t in (deadline, wake) if t is not None), default=None)
            # 0 would mean "never time out": a step that is due is a microsecond.
            _set_send_timeout(sock, 0.0 if step is None else max(step - now, 1e-6))
            try:
                sock.connect(address)
            except BlockingIOError:  # the step's send timeout: still no place
                continue
            if _connected(sock):
                return
    finally:
        _set_send_timeout(sock, 0.0)
        if watcher is not None:
            watcher.ended()


def _next_wake(watcher: ConnectWatcher, started: float, waited: float) -> float | None:
    delay = watcher.waiting(waited)
    return None if delay is None else started + waited + max(delay, 0.0)


def _connected(sock: socket.socket) -> bool:
    """Whether `sock` has a peer. A blocking connect(2) interrupted by a signal whose handler
    raises nothing (or that a worker thread took) is finished by Python as a TCP connect
    would be, by waiting until the socket is writable — which an unconnected Unix socket
    always is: the connect then returns without having connected, and is tried again."""
    try:
        sock.getpeername()
    except OSError as exc:
        if exc.errno == errno.ENOTCONN:
            return False
        raise
    return True


def _set_send_timeout(sock: socket.socket, seconds: float) -> None:
    whole = int(seconds)
    micro = int((seconds - whole) * 1_000_000)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, struct.pack("@ll", whole, micro))
