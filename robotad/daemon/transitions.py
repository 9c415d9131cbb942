"""Sessions on their way in and out, as a daemon shutdown must see them.

A session *arrives* while it is loaded or created — from the moment the manager takes the
request until the session is live (or given up) — and *leaves* while it is retired: drained,
saved, its SessionEnd fired, its provider and tool servers closed. Both take a while (a
SessionStart or SessionEnd hook runs up to its timeout) and both run in whichever task asked
for them: a connection's request, the idle sweep, the shutdown itself. `Transitions` keeps
them where a shutdown finds them:

- `arriving()` refuses a new arrival once the daemon shuts down (`NotAllowed`), and
  registers one under way, which the shutdown waits for within its grace (`arrivals_settled`)
  so the session it brings is closed with the others — never left loaded after the shutdown
  closed everything, or half started; `cut_arrivals` at the grace's end stops the ones still
  under way, each then refused `NotAllowed` after undoing what it did.
- `leaving()` shields a retire from whoever asked for it: a client that cancels its
  ``session/close`` or goes away (its request is cancelled with the connection) stops only
  its waiting, never the SessionEnd hook or the release of the session halfway, which left a
  session unloaded with its provider and session-scoped tool servers never closed.
- `cut_if_cancelled(body)` runs a shutdown step: if it is cancelled from outside — the
  server's deadline, a forced stop — every arrival and retire still shielding itself is cut,
  so none outlives the daemon's deadline.

Its one concept is the daemon's view of sessions in transition; the manager owns the rest.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager

import trio

from protocol.errors import NotAllowed

__all__ = ["Transitions"]


class Transitions:
    """The arrivals and retires of one manager's sessions; see the module doc."""

    def __init__(self) -> None:
        #: Set once the daemon shuts down: no session arrives any more.
        self.closing = False
        self._arriving: set[trio.CancelScope] = set()
        self._arrivals_done = trio.Event()
        self._arrivals_done.set()
        self._leaving: set[trio.CancelScope] = set()

    @contextmanager
    def arriving(self) -> Iterator[None]:
        """Hold one load or create for its whole way in. `NotAllowed` at once while the
        daemon shuts down, and when `cut_arrivals` stopped it (the block has undone its work
        by then: it runs its own cleanup under a shield)."""
        if self.closing:
            raise NotAllowed("the daemon is shutting down")
        scope = trio.CancelScope()
        if not self._arriving:
            self._arrivals_done = trio.Event()
        self._arriving.add(scope)
        try:
            with scope:
                yield
        finally:
            self._arriving.discard(scope)
            if not self._arriving:
                self._arrivals_done.set()
        if scope.cancelled_caught:
            raise NotAllowed("the daemon is shutting down")

    async def arrivals_settled(self) -> None:
        """Return once no session is arriving (at once when none is)."""
        while self._arriving:
            await self._arrivals_done.wait()

    def cut_arrivals(self) -> None:
        """Stop every arrival still under way (each ends refused, see `arriving`)."""
        for scope in list(self._arriving):
            scope.cancel()

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
        """Cut every arrival and retire still under way: the daemon cannot wait for them."""
        self.cut_arrivals()
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
