"""The bookkeeping of one piece of work holding the claim: a turn, a compaction, a direct call.

Everything a turn's collaborators need to know about "the turn in flight" lives here, in one
place: its id (None outside a turn), the abort signal of its claim, its trace root (when the
session traces), the advisory hook failures collected for ``turn_finished.hookFailures``, the
nursery its fire-and-forget hooks run in, and the provider request still awaiting its response
(so the log never leaves a request without an answer) or still to be placed in the log.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import trio

from robotad.agent.abort import AbortSignal
from robotad.session.hooks.runner import HookFailure
from robotad.session.hooks.trace import TraceContext
from robotad.session.turn.claim import ClaimToken
from robotad.storage.log_events import ProviderRequestEntry
from robotad.storage.session_log import PendingLine

__all__ = ["RequestLine", "TurnContext"]


@dataclass(eq=False)
class RequestLine:
    """A provider request's ``provider_request`` line on its way to the log: `entry` builds
    it; `pending` is the line placed in the log's order while its tool set is being stored."""

    entry: Callable[[], ProviderRequestEntry]
    pending: PendingLine | None = None


@dataclass(eq=False)
class TurnContext:
    """One claim holder's state. `trace` is set only for a turn of a tracing session: hooks
    fired on the turn's own path get its root's TRACEPARENT (G-135), nothing else does."""

    token: ClaimToken
    trace: TraceContext | None = None
    #: False for a no-input continuation: no UserPromptSubmit, Stop or StopFailure (G-133).
    prompted: bool = True
    hook_failures: list[HookFailure] = field(default_factory=list)
    background: trio.Nursery | None = None
    #: The provider request id logged but not yet answered in the log.
    open_request: str | None = None
    #: The open request's ``provider_request`` line, while it has no place in the log yet.
    unplaced_request: RequestLine | None = None
    rounds: int = 0
    #: The turn's round limit (PROTOCOL §10.2): provider calls it may make; None = no limit.
    round_cap: int | None = None

    @property
    def turn_id(self) -> str | None:
        return self.token.turn_id

    @property
    def abort(self) -> AbortSignal:
        return self.token.abort

    @property
    def traceparent(self) -> str | None:
        """The prompt root's ``traceparent``, or None when this work is not traced."""
        return self.trace.traceparent if self.trace is not None else None
