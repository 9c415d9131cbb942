"""The turn claim: one session runs one thing at a time (G-058…G-068).

A session is one conversation, so a turn, a compaction and a direct tool invocation all take
the same exclusive claim. `TurnClaim.claim` is synchronous: a caller that claims before its
first ``await`` holds the session from the moment it was scheduled, so of two runs started in
the same scheduler tick exactly one proceeds (G-058). A claim that is held is refused at once
with `SessionBusy` naming the holder (G-059) — never queued, never pre-empting (G-060).

`release(token)` frees the claim only while that token still holds it, so a late-finishing
holder can never free a claim a newer one took (G-063). `running` is true from the claim until
its holder released it: an aborted turn keeps it while it unwinds (G-064, G-065). Each holder
carries the `AbortSignal` that `abort()` of the session fires; signalling never releases, and a
holder whose outcome is settled takes no abort (architecture decision 42).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

import trio

from protocol.errors import SessionBusy
from robotad.agent.abort import AbortSignal

__all__ = ["ClaimKind", "ClaimToken", "TurnClaim"]

ClaimKind = Literal["turn", "compaction", "direct", "resume"]


@dataclass(eq=False)
class ClaimToken:
    """One holding of the claim. Identity matters: only this object releases its holding.
    `turn_id` is what `SessionBusy` reports (None for a manual compaction or a direct call,
    which belong to no turn)."""

    kind: ClaimKind
    turn_id: str | None
    abort: AbortSignal = field(default_factory=AbortSignal)


class TurnClaim:
    """The exclusive claim of one session."""

    def __init__(self, session_id: str) -> None:
        self.session_id = session_id
        self._holder: ClaimToken | None = None
        self._released = trio.Event()
        self._released.set()

    @property
    def running(self) -> bool:
        """Whether anything holds the claim (an aborted holder still does, until it releases)."""
        return self._holder is not None

    @property
    def holder(self) -> ClaimToken | None:
        return self._holder

    def claim(
        self, kind: ClaimKind, turn_id: str | None = None, abort: AbortSignal | None = None
    ) -> ClaimToken:
        """Take the claim now, or raise `SessionBusy(session_id, holder's turn id)`.
        Synchronous: nothing can interleave between the check and the take. `abort` is the
        holder's signal when the caller made it earlier (fired already: the work starts
        aborted)."""
        if self._holder is not None:
            raise SessionBusy(self.session_id, self._holder.turn_id, self._holder.kind)
        token = ClaimToken(kind, turn_id, abort if abort is not None else AbortSignal())
        self._holder = token
        self._released = trio.Event()
        return token

    def release(self, token: ClaimToken) -> bool:
        """Free the claim if `token` still holds it; False (and nothing changes) otherwise."""
        if self._holder is not token:
            return False
        self._holder = None
        self._released.set()
        return True

    def abort(self) -> bool:
        """Signal the holder's abort. True when the holder ends aborted for it (whether or
        not it was already signalled); False when the session is idle, or the holder's outcome
        was settled already (`AbortSignal.settle`: then only its closing hooks are cut)."""
        holder = self._holder
        if holder is None:
            return False
        holder.abort.abort()
        return holder.abort.aborted

    async def wait_released(self) -> None:
        """Return once nothing holds the claim (at once when idle)."""
        while self._holder is not None:
            await self._released.wait()
