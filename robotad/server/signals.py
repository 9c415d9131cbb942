"""What SIGTERM and SIGINT do as the daemon's life goes on (PROTOCOL.md §1, README).

`serve_daemon` receives both from its first moment to its last and hands each to
`DaemonSignals.deliver`: before the daemon serves, a signal stops the start-up by cancelling
`start_scope` (opened around all of it; what was made is undone as the cancellation unwinds);
while it serves, a graceful shutdown with the default grace; once that has begun, a second one
stops it now. A signal that came before the receiver was open, held by
`robotad.startup_signals`, is delivered the same way.
"""

from __future__ import annotations

import logging
import signal
from collections.abc import AsyncIterator

import trio

from robotad.server.daemon_methods import DEFAULT_GRACE_SECONDS
from robotad.server.serve import Server

__all__ = ["DaemonSignals"]

log = logging.getLogger("robotad.server")


class DaemonSignals:
    """What SIGTERM and SIGINT do as the daemon's life goes on: before it serves, stop the
    start-up (`start_scope`, around all of it); while it serves, a graceful shutdown; once
    that has begun, stop now."""

    def __init__(self) -> None:
        self.start_scope = trio.CancelScope()
        #: Set once serving: from then on a signal is the server's to act on.
        self.server: Server | None = None

    async def listen(self, received: AsyncIterator[int]) -> None:
        async for signum in received:
            self.deliver(signum)

    def deliver(self, signum: int) -> None:
        name = signal.Signals(signum).name
        if self.server is None:
            if not self.start_scope.cancel_called:
                log.info("%s during start-up: stopping before serving", name)
            self.start_scope.cancel()
        elif self.server.shutting_down:
            log.warning("%s during shutdown: closing now", name)
            self.server.force_shutdown()
        else:
            log.info("%s: shutting down", name)
            self.server.request_shutdown(DEFAULT_GRACE_SECONDS)
