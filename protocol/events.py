"""The ``session/event`` notification (PROTOCOL.md §6), as a tagged union on ``type``.

Every event of a session carries `sessionId`, `seq` (per session, strictly increasing) and
`turnId` (the turn it belongs to — auto-compaction included — or null outside a turn), then
the members of its type. The one exception is `overflow`, which is not a session event but a
notice to one subscriber: its queue overflowed, it was unsubscribed, and it should resubscribe
with `afterSeq`; it carries `sessionId` and `latestSeq` only.

Decode a notification's params with ``msgspec.json.decode(raw, type=SessionEvent)`` and
dispatch on the class (or on ``.type`` via `EVENT_TYPES`).
"""

from __future__ import annotations

from typing import Any, Final, Literal

from msgspec import UNSET, Struct, UnsetType

from protocol.shapes import ApprovalRequest, ContextState, StopReason

__all__ = [
    "EVENT_METHOD",
    "EVENT_TYPES",
    "ApprovalRequested",
    "ApprovalResolved",
    "Compaction",
    "ContextUpdated",
    "ErrorObject",
    "HookFailure",
    "LogFailure",
    "Overflow",
    "PermissionDecided",
    "SessionClosed",
    "SessionEvent",
    "TextDelta",
    "ToolFinished",
    "ToolStarted",
    "TurnFinished",
    "TurnStarted",
]

#: The notification method that carries every event.
EVENT_METHOD: Final = "session/event"


class _Tagged(Struct, rename="camel", forbid_unknown_fields=True, frozen=True, tag_field="type"):
    """Base of every ``session/event`` params shape."""


class _Event(_Tagged, frozen=True):
    """Members every session event has, before those of its type."""

    session_id: str
    seq: int
    turn_id: str | None


class TurnStarted(_Event, frozen=True, tag="turn_started"):
    prompt: str


class TextDelta(_Event, frozen=True, tag="text_delta"):
    text: str


class ToolStarted(_Event, frozen=True, tag="tool_started"):
    call_id: str
    tool: str
    arguments: dict[str, Any]


class PermissionDecided(_Event, frozen=True, tag="permission_decided"):
    call_id: str
    tool: str
    decision: Literal["allow", "ask", "deny"]
    reason: str | UnsetType = UNSET


class ToolFinished(_Event, frozen=True, tag="tool_finished"):
    """`preview` is the start of the result text, for display."""

    call_id: str
    tool: str
    ok: bool
    preview: str


class ApprovalRequested(_Event, frozen=True, tag="approval_requested"):
    execution_id: str
    requests: list[ApprovalRequest]


class ApprovalResolved(_Event, frozen=True, tag="approval_resolved"):
    execution_id: str
    request_id: str
    approved: bool


class ContextUpdated(_Event, frozen=True, tag="context_updated"):
    """``phase`` "estimated" before a provider call, "exact" after it, then the members of
    `ContextState` inline."""

    phase: Literal["estimated", "exact"]
    used_tokens: int
    max_tokens: int
    used_percentage: float
    remaining_percentage: float

    @classmethod
    def of(
        cls,
        session_id: str,
        seq: int,
        turn_id: str | None,
        phase: Literal["estimated", "exact"],
        state: ContextState,
    ) -> ContextUpdated:
        return cls(
            session_id,
            seq,
            turn_id,
            phase,
            state.used_tokens,
            state.max_tokens,
            state.used_percentage,
            state.remaining_percentage,
        )

    @property
    def context(self) -> ContextState:
        return ContextState(
            self.used_tokens, self.max_tokens, self.used_percentage, self.remaining_percentage
        )


class Compaction(_Event, frozen=True, tag="compaction"):
    trigger: Literal["manual", "auto"]
    phase: Literal["started", "completed", "failed", "aborted"]


class ErrorObject(Struct, forbid_unknown_fields=True, frozen=True):
    """A JSON-RPC error object ``{code, message, data?}``, as `RpcError.to_wire` builds it."""

    code: int
    message: str
    data: dict[str, Any] | UnsetType = UNSET


class HookFailure(Struct, forbid_unknown_fields=True, frozen=True):
    """An advisory hook that failed during the turn: its event name and why."""

    event: str
    reason: str


class LogFailure(Struct, rename="camel", forbid_unknown_fields=True, frozen=True):
    """The session log could not be appended during the turn (PROTOCOL.md §10.1): `dropped`
    entries were lost, the last for `reason`; `path` is relative to the state folder. The
    turn itself was saved regardless."""

    path: str
    reason: str
    dropped: int


class TurnFinished(_Event, frozen=True, tag="turn_finished"):
    """The outcome of a turn: `response` and `stopReason` when completed, `error` (the error
    the requester got) when failed or aborted, `hookFailures` when advisory hooks failed,
    `logFailure` when the session log could not be written."""

    status: Literal["completed", "waiting", "aborted", "failed"]
    response: str | UnsetType = UNSET
    stop_reason: StopReason | UnsetType = UNSET
    error: ErrorObject | UnsetType = UNSET
    hook_failures: list[HookFailure] | UnsetType = UNSET
    log_failure: LogFailure | UnsetType = UNSET


class SessionClosed(_Event, frozen=True, tag="session_closed"):
    pass


class Overflow(_Tagged, frozen=True, tag="overflow"):
    """Sent to one subscriber whose queue overflowed; it is unsubscribed from `sessionId` and
    resubscribes with `afterSeq`."""

    session_id: str
    latest_seq: int


SessionEvent = (
    TurnStarted
    | TextDelta
    | ToolStarted
    | PermissionDecided
    | ToolFinished
    | ApprovalRequested
    | ApprovalResolved
    | ContextUpdated
    | Compaction
    | TurnFinished
    | SessionClosed
    | Overflow
)

#: ``type`` value → event class.
EVENT_TYPES: Final[dict[str, type[_Tagged]]] = {
    cls.__struct_config__.tag: cls  # type: ignore[misc]
    for cls in (
        TurnStarted,
        TextDelta,
        ToolStarted,
        PermissionDecided,
        ToolFinished,
        ApprovalRequested,
        ApprovalResolved,
        ContextUpdated,
        Compaction,
        TurnFinished,
        SessionClosed,
        Overflow,
    )
}
