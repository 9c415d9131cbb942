"""Abort: a one-shot request, from any task, that a turn stop what it is doing.

The Session owns one `AbortSignal` per turn and calls `abort()` from whichever task serves
``session/abort``. The loop (and compaction) run their work inside `signal.scope()`, a trio
cancel scope the signal cancels. Unlike cancelling an enclosing scope, this lets the loop tell an
abort apart from any other cancellation: it catches its own scope, closes what it started (the
interrupted partial reply, the interrupted tool calls) and raises its own abort error, while a
cancellation from outside still propagates untouched.

`abort()` only signals; the turn is over when the code running under the scope has unwound.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import trio

__all__ = ["AbortSignal"]


class AbortSignal:
    """Set once, never reset. Every scope opened with `scope()` — before or after the abort —
    is cancelled by it, so one signal can cover a turn's compaction and its loop."""

    def __init__(self) -> None:
        self._aborted = False
        self._scopes: set[trio.CancelScope] = set()

    @property
    def aborted(self) -> bool:
        """Whether `abort()` has been called."""
        return self._aborted

    def abort(self) -> bool:
        """Cancel every open scope of this signal. Returns False when it was already aborted."""
        if self._aborted:
            return False
        self._aborted = True
        for scope in list(self._scopes):
            scope.cancel()
        return True

    @contextmanager
    def scope(self) -> Iterator[trio.CancelScope]:
        """A cancel scope this signal cancels (at once, when already aborted). After the block,
        ``scope.cancelled_caught`` tells whether the abort is what stopped it."""
        cancel_scope = trio.CancelScope()
        if self._aborted:
            cancel_scope.cancel()
        self._scopes.add(cancel_scope)
        try:
            with cancel_scope:
                yield cancel_scope
        finally:
            self._scopes.discard(cancel_scope)
