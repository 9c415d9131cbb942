"""The one session-log vocabulary: every event name and the shape of its payload.

Writer (`SessionLogger.log`) and reader (`decode_log`) both use `PAYLOADS`; an event that is not
in it can be neither written nor read (G-149), and a test scans the storage sources so no event
name appears on only one side.

Payload shapes name the members each event must carry (typed, checked on write and on read).
Payloads may carry further members; they are kept verbatim, never dropped. Messages inside
payloads are full `Message` objects, so `history_mutation` entries rebuild history (G-145).

``history_mutation`` operations:

- ``append``: `messages` are appended to history;
- ``replace``: history becomes exactly `messages` (compaction, fork);
- ``set``: the one message in `messages` replaces history entry `index` (e.g. an interrupted
  partial marked, a result rewritten).
"""

from __future__ import annotations

from typing import Any, Literal, get_args

from msgspec import UNSET, Struct, UnsetType

from protocol.shapes import Message, ToolCall, Usage

__all__ = [
    "LOG_EVENTS",
    "LOG_SCHEMA_VERSION",
    "PAYLOADS",
    "LogEventName",
]

#: Version of the log line envelope and payload shapes.
LOG_SCHEMA_VERSION = 1

LogEventName = Literal[
    "session_start",
    "session_end",
    "turn_started",
    "turn_completed",
    "user_message",
    "provider_request",
    "provider_response",
    "text_delta",
    "tool_call",
    "permission_decision",
    "tool_result",
    "approval_requested",
    "approval_resolved",
    "history_mutation",
    "context_update",
    "context_compact",
    "turn_aborted",
    "turn_failed",
    "hook_failure",
    "execution_abandoned",
    "recovered",
]

#: Every event name, in declaration order.
LOG_EVENTS: tuple[str, ...] = get_args(LogEventName)


class _Payload(Struct, rename="camel"):
    """Base of payload shapes: declared members typed, further members allowed."""


class SessionStartEntry(_Payload):
    source: Literal["startup", "resume", "fork", "import"]
    cwd: str


class SessionEndEntry(_Payload):
    reason: str | UnsetType = UNSET


class TurnStartedEntry(_Payload):
    turn_id: str


class TurnCompletedEntry(_Payload):
    turn_id: str
    status: Literal["completed", "waiting"]


class UserMessageEntry(_Payload):
    message: Message


class ProviderRequestEntry(_Payload):
    """What was sent to the model: the request's members (tools, tool choice, effort…) and
    its messages — in full under ``messages``, or, when they are the session's history as the
    log's ``history_mutation`` events rebuild it at this line, by reference:
    ``history_prefix: {count, last_message_id}`` (that history's first `count` messages) and
    ``system_context: {index, message}`` (a system message inserted at `index`)."""

    request_id: str
    provider: str
    model: str
    request: dict[str, Any]


class NormalizedResponseEntry(_Payload):
    text: str
    tool_calls: list[ToolCall]
    usage: Usage | UnsetType | None = UNSET
    stop_reason: str | UnsetType | None = UNSET


class ProviderResponseEntry(_Payload):
    """What came back: the vendor-native final payload, the raw stream payload, and our
    normalised reading of it (G-144). A failed call carries `error` and no `normalized`;
    one whose reply arrived whole but was refused (a tool call without a name) carries that
    reply's payloads as well."""

    request_id: str
    native_raw: Any = UNSET
    raw: Any = UNSET
    normalized: NormalizedResponseEntry | UnsetType = UNSET
    error: str | UnsetType = UNSET


class TextDeltaEntry(_Payload):
    text: str
    request_id: str | UnsetType = UNSET


class ToolCallEntry(_Payload):
    call_id: str
    tool: str
    arguments: dict[str, Any]


class PermissionDecisionEntry(_Payload):
    call_id: str
    tool: str
    decision: Literal["allow", "ask", "deny"]
    reason: str | UnsetType = UNSET


class ToolResultEntry(_Payload):
    call_id: str
    tool: str
    ok: bool
    content: str | None


class ApprovalRequestedEntry(_Payload):
    execution_id: str
    requests: list[dict[str, Any]]


class ApprovalResolvedEntry(_Payload):
    execution_id: str
    request_id: str
    approved: bool


class HistoryMutationEntry(_Payload):
    op: Literal["append", "replace", "set"]
    messages: list[Message]
    index: int | UnsetType = UNSET


class ContextUpdateEntry(_Payload):
    phase: Literal["estimated", "exact"]
    used_tokens: int
    max_tokens: int


class ContextCompactEntry(_Payload):
    trigger: Literal["manual", "auto"]
    phase: Literal["started", "completed", "failed", "aborted"]


class TurnAbortedEntry(_Payload):
    turn_id: str


class TurnFailedEntry(_Payload):
    turn_id: str
    error: str


class HookFailureEntry(_Payload):
    event: str
    reason: str


class ExecutionAbandonedEntry(_Payload):
    """`call_ids` are the tool calls the abandonment closed as failed."""

    execution_id: str
    call_ids: list[str]


class RecoveredCall(Struct, rename="camel"):
    """A tool call a stop of robotad cut off: `outcome` is what the history says of it —
    its saved result's ``completed``/``failed``, or ``unknown``."""

    call_id: str
    outcome: Literal["completed", "failed", "unknown"]


class RecoveredEntry(_Payload):
    """Written on the next start after robotad stopped with these still open (a kill, a
    crash): it closes each provider request and tool call with what is known, and a
    compaction the stop cut off (`compaction`: its trigger; it never finished, so nothing of
    it was saved — a compaction applies all or nothing)."""

    reason: str
    request_ids: list[str]
    calls: list[RecoveredCall]
    compaction: Literal["manual", "auto"] | UnsetType = UNSET


#: The payload shape of every event; its keys are exactly `LOG_EVENTS`.
PAYLOADS: dict[str, type[_Payload]] = {
    "session_start": SessionStartEntry,
    "session_end": SessionEndEntry,
    "turn_started": TurnStartedEntry,
    "turn_completed": TurnCompletedEntry,
    "user_message": UserMessageEntry,
    "provider_request": ProviderRequestEntry,
    "provider_response": ProviderResponseEntry,
    "text_delta": TextDeltaEntry,
    "tool_call": ToolCallEntry,
    "permission_decision": PermissionDecisionEntry,
    "tool_result": ToolResultEntry,
    "approval_requested": ApprovalRequestedEntry,
    "approval_resolved": ApprovalResolvedEntry,
    "history_mutation": HistoryMutationEntry,
    "context_update": ContextUpdateEntry,
    "context_compact": ContextCompactEntry,
    "turn_aborted": TurnAbortedEntry,
    "turn_failed": TurnFailedEntry,
    "hook_failure": HookFailureEntry,
    "execution_abandoned": ExecutionAbandonedEntry,
    "recovered": RecoveredEntry,
}

assert tuple(PAYLOADS) == LOG_EVENTS, "PAYLOADS must cover the vocabulary exactly"
