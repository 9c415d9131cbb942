"""Sessions on their way out, as a daemon shutdown must see them.

A session *leaves* while it is retired: drained, saved, its SessionEnd fired, its provider and
tool servers closed. That takes a while (a SessionEnd hook runs up to its timeout) and runs in
whichever task asked for it: a connection's request, the idle sweep, the shutdown itself.
`Transitions` keeps it where a shutdown finds it:

- `leaving()` shields a retire from whoever asked for it: a client that cancels its
  ``session/close`` or goes away (its request is cancelled with the connection) stops only
  its waiting, never the SessionEnd hook or the release of the session halfway, which left a
  session unloaded with its provider and session-scoped tool servers never closed.
- `cut_if_cancelled(body)` runs a shutdown step: if it is cancelled from outside — the
  server's deadline, a forced stop — every retire still shielding itself is cut,
  so none outlives the daemon's deadline.

Its one concept is the daemon's view of sessions in transition; the manager owns the rest.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager

import trio

__all__ = ["Transitions"]


class Transitions:
    """The retires of one manager's sessions; see the module doc."""

    def __init__(self) -> None:
        #: Set once the daemon shuts down.
        self.closing = False
        self._leaving: set[trio.CancelScope] = set()

    @contextmanager
    def leaving(self) -> Iterator[None]:
        """Shield one retire from its requester's cancellation; only `cut` ends it early."""
        scope = trio.CancelScope(shield=True)
        self._leaving.add(scope)
        try:
            with scope:
                yield
        finally:
            self._leaving.discard(scope)

    def cut(self) -> None:
        """Cut every retire still under way: the daemon cannot wait for it."""
        for scope in list(self._leaving):
            scope.cancel()

    async def cut_if_cancelled(self, body: Callable[[], Awaitable[None]]) -> None:
        """Run `body`; when it is cancelled (or fails), `cut` what it may be waiting on. A
        watcher beside it sees the cancellation even while `body` waits on work that shields
        itself (a nursery of retires cannot be left before they end)."""
        done = False

        async def watch() -> None:
            try:
                await trio.sleep_forever()
            finally:
                if not done:
                    self.cut()

        async with trio.open_nursery() as watching:
            watching.start_soon(watch)
            try:
                await body()
                done = True
            except BaseException:
                self.cut()
                raise
            finally:
                watching.cancel_scope.cancel()
