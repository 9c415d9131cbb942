"""What the chat knows at a moment: plain values, no I/O.

The event follower and the controller (trio side) write it; the prompt (prompt_toolkit side)
reads it to draw the live area, the approval question and the status line. Both sides run on
one thread (trio is a guest of prompt_toolkit's asyncio loop), so no lock is needed.

`ChatState` holds the attached session's `SessionInfo` as last seen (kept current by events:
the context from ``context_updated``, the pending requests from ``approval_requested`` and
``approval_resolved``), the running turn (its id, when it began, whether this client asked to
abort it), the model text streamed since the last printed block, and the last tool call
(for ``/last``).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from protocol.shapes import ApprovalRequest, ContextState, SessionInfo

__all__ = ["ChatState", "ToolCallRecord"]


@dataclass
class ToolCallRecord:
    """One tool call as the events told it: what ran and how it ended."""

    call_id: str
    tool: str
    arguments: dict[str, Any]
    ok: bool | None = None
    preview: str = ""
    decision: str | None = None


@dataclass
class ChatState:
    """The chat's view of its session (see the module docstring)."""

    info: SessionInfo | None = None
    #: Requests waiting for a person, oldest first (the first one is asked about).
    pending: list[ApprovalRequest] = field(default_factory=list)
    #: The turn running in the session (started here or by another client), else None.
    turn_id: str | None = None
    #: `time.monotonic()` when that turn started (for the elapsed time in the status line).
    turn_began: float = 0.0
    #: Whether this client asked to abort the running turn (a second Ctrl-C then leaves).
    abort_asked: bool = False
    #: Turn ids this client started (their prompts are already on the screen).
    own_turns: set[str] = field(default_factory=set)
    #: Model text streamed since the last block was printed (shown in the live area).
    live_text: str = ""
    #: The last tool call of the session seen here, for ``/last``.
    last_call: ToolCallRecord | None = None
    #: Calls seen in the running turn, by call id.
    calls: dict[str, ToolCallRecord] = field(default_factory=dict)
    #: Sessions offered by ``/sessions``, while the person picks one.
    picking: list[str] | None = None
    #: Whether the last key was a Ctrl-C (an abort, or nothing to abort): the next one leaves.
    #: Any other key disarms it (the prompt sees keys), and so does the end of a turn, unless
    #: it is the end of the turn that Ctrl-C aborted ("Ctrl-C again leaves" still holds).
    leave_armed: bool = False

    @property
    def session_id(self) -> str:
        return "" if self.info is None else self.info.session_id

    @property
    def running(self) -> bool:
        return self.turn_id is not None

    def attach(self, info: SessionInfo) -> None:
        """Start over on `info`'s session (nothing of the previous one is kept)."""
        self.info = info
        self.pending = list(info.pending.requests) if info.pending is not None else []
        self.turn_id = None
        self.abort_asked = False
        self.live_text = ""
        self.calls = {}
        self.picking = None

    def turn_started(self, turn_id: str) -> None:
        if self.turn_id != turn_id:
            self.turn_id = turn_id
            self.turn_began = time.monotonic()
            self.abort_asked = False
            self.calls = {}

    def turn_ended(self) -> None:
        if not self.abort_asked:
            self.leave_armed = False
        self.turn_id = None
        self.abort_asked = False

    def elapsed(self) -> float:
        """Seconds since the running turn started (0 when none runs)."""
        return time.monotonic() - self.turn_began if self.running else 0.0

    def set_context(self, context: ContextState) -> None:
        if self.info is not None:
            self.info.context = context

    def add_requests(self, requests: list[ApprovalRequest]) -> None:
        known = {request.request_id for request in self.pending}
        self.pending.extend(r for r in requests if r.request_id not in known)

    def drop_request(self, request_id: str) -> bool:
        """Forget a request answered (here or elsewhere); whether it was waiting."""
        before = len(self.pending)
        self.pending = [r for r in self.pending if r.request_id != request_id]
        return len(self.pending) != before

    def take_live_text(self) -> str:
        """The streamed text not yet printed, emptied."""
        text, self.live_text = self.live_text, ""
        return text
