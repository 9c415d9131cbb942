"""The `sd_notify` protocol without libsystemd (PROTOCOL.md §1).

With ``NOTIFY_SOCKET`` set, the service manager listens on that datagram socket for
newline-separated ``KEY=VALUE`` assignments. A name starting with ``@`` is in the Linux
abstract namespace (the ``@`` stands for a leading NUL byte). The daemon sends ``READY=1``
once it is serving, ``STOPPING=1`` when a shutdown begins, and — with ``WATCHDOG_USEC`` set
(and ``WATCHDOG_PID``, if present, naming this process) — ``WATCHDOG=1`` every half interval.

`Notifier.from_environ` removes these variables from the environment it reads, so hooks and
tool subprocesses never talk to the service manager in the daemon's name. A notifier without
a socket is a no-op, so callers never branch on "are we under systemd". Sending never raises:
a lost notification is logged, not fatal.
"""

from __future__ import annotations

import logging
import os
import socket
from collections.abc import MutableMapping

import trio

__all__ = ["Notifier"]

log = logging.getLogger("robotad.server.notify")

#: How long a single datagram may block when the manager's queue is full.
SEND_TIMEOUT = 1.0


class Notifier:
    """Sends state changes to the service manager at `address` (None: do nothing)."""

    def __init__(self, address: str | None, *, watchdog_interval: float | None = None) -> None:
        self.address = address
        self.watchdog_interval = watchdog_interval
        self._sock: socket.socket | None = None

    @classmethod
    def from_environ(cls, environ: MutableMapping[str, str], *, unset: bool = True) -> Notifier:
        """Read ``NOTIFY_SOCKET``, ``WATCHDOG_USEC`` and ``WATCHDOG_PID``; remove them if `unset`.

        A relative ``NOTIFY_SOCKET`` is ignored (systemd only ever passes absolute or abstract
        names). The watchdog interval is half of ``WATCHDOG_USEC``, in seconds.
        """
        address = environ.get("NOTIFY_SOCKET") or None
        if address is not None and not address.startswith(("/", "@")):
            log.warning("ignoring NOTIFY_SOCKET that is neither absolute nor abstract")
            address = None
        interval = _watchdog_interval(environ.get("WATCHDOG_USEC"), environ.get("WATCHDOG_PID"))
        if unset:
            for name in ("NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID"):
                environ.pop(name, None)
        return cls(address, watchdog_interval=interval)

    @property
    def enabled(self) -> bool:
        return self.address is not None

    def notify(self, *assignments: str) -> bool:
        """Send ``KEY=VALUE`` lines as one datagram. True when sent; False when disabled or lost."""
        if self.address is None or not assignments:
            return False
        payload = "\n".join(assignments).encode()
        target = "\0" + self.address[1:] if self.address.startswith("@") else self.address
        try:
            if self._sock is None:
                self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
                self._sock.settimeout(SEND_TIMEOUT)
            self._sock.sendto(payload, target)
        except OSError as exc:
            log.warning("cannot notify the service manager: %s", exc.strerror or exc)
            return False
        return True

    def ready(self, status: str | None = None) -> bool:
        """``READY=1`` (plus ``STATUS=``), once the daemon accepts connections."""
        return self.notify("READY=1", *([f"STATUS={status}"] if status else []))

    def stopping(self, status: str | None = None) -> bool:
        """``STOPPING=1`` (plus ``STATUS=``), when a shutdown begins."""
        return self.notify("STOPPING=1", *([f"STATUS={status}"] if status else []))

    async def run_watchdog(
        self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
    ) -> None:
        """Send ``WATCHDOG=1`` every half interval until cancelled; returns at once if unasked."""
        task_status.started()
        if self.address is None or self.watchdog_interval is None:
            return
        while True:
            self.notify("WATCHDOG=1")
            await trio.sleep(self.watchdog_interval)

    def close(self) -> None:
        sock, self._sock = self._sock, None
        if sock is not None:
            sock.close()


def _watchdog_interval(usec: str | None, pid: str | None) -> float | None:
    if not usec:
        return None
    if pid and pid != str(os.getpid()):
        return None
    try:
        micros = int(usec)
    except ValueError:
        log.warning("ignoring malformed WATCHDOG_USEC")
        return None
    if micros <= 0:
        return None
    return micros / 2 / 1_000_000
