"""Abort: a one-shot request, from any task, that a turn stop what it is doing.

The Session owns one `AbortSignal` per turn and calls `abort()` from whichever task serves
``session/abort``. The loop (and compaction) run their work inside `signal.scope()`, a trio
cancel scope the signal cancels. Unlike cancelling an enclosing scope, this lets the loop tell an
abort apart from any other cancellation: it catches its own scope, closes what it started (the
interrupted partial reply, the interrupted tool calls) and raises its own abort error, while a
cancellation from outside still propagates untouched.

`abort()` only signals; the turn is over when the code running under the scope has unwound.

The work's outcome is decided at one moment — a turn's last reply arrived, its round parked or
failed; a compaction's summary is about to be applied — and the work says so with `settle()`.
From then on an abort no longer changes how the work ends: it is not taken (`aborted` stays
false, so whoever asked is told nothing was stopped) and only cuts short the closing hooks still
running under the signal's scopes (Stop, StopFailure, PostCompact), so the session is free
sooner. An abort that came before `settle()` wins: `settle()` says so and the work ends aborted.
Every party — the abort's requester, the work's requester, its events, record and log — thus
tells one story (architecture decision 42).
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
        self._settled = False
        #: An abort came after `settle`: later scopes (closing hooks) start cancelled too.
        self._cut = False
        self._scopes: set[trio.CancelScope] = set()

    @classmethod
    def settled_now(cls) -> AbortSignal:
        """A signal of work that no abort can stop (its `abort()` takes nothing)."""
        signal = cls()
        signal.settle()
        return signal

    @property
    def aborted(self) -> bool:
        """Whether an abort was taken: the work ends aborted."""
        return self._aborted

    @property
    def settled(self) -> bool:
        """Whether the work's outcome is decided (see the module doc)."""
        return self._settled

    def abort(self) -> bool:
        """Cancel every open scope of this signal. Returns True when this call made the work
        stop; False when it was already aborted, or its outcome was settled first (then only
        the closing hooks still running are cut short)."""
        for scope in list(self._scopes):
            scope.cancel()
        if self._settled:
            self._cut = True
            return False
        if self._aborted:
            return False
        self._aborted = True
        return True

    def settle(self) -> bool:
        """Decide that the work ends on its own: later aborts are not taken. False (and
        nothing changes) when an abort was taken first — the work must then end aborted."""
        if self._aborted:
            return False
        self._settled = True
        return True

    @contextmanager
    def scope(self) -> Iterator[trio.CancelScope]:
        """A cancel scope this signal cancels (at once, when already aborted). After the block,
        ``scope.cancelled_caught`` tells whether the abort is what stopped it."""
        cancel_scope = trio.CancelScope()
        if self._aborted or self._cut:
            cancel_scope.cancel()
        self._scopes.add(cancel_scope)
        try:
            with cancel_scope:
                yield cancel_scope
        finally:
            self._scopes.discard(cancel_scope)
