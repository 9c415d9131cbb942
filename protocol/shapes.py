"""The shared shapes of PROTOCOL.md §4: messages, context, approvals, session info, turn results.

These Structs are the one definition of each shape: the daemon's history, the stored record, the
journal, the wire and the clients all use them. Field names are snake_case in Python and
camelCase on the wire (``rename="camel"``). Optional members use `msgspec.UNSET`, so a member
that was absent stays absent when re-encoded and one that was present stays present (no
defaults are ever written in).

Timestamps are timezone-aware `datetime`s, normalised to UTC, and encode as ISO-8601 ending in
``Z``.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Annotated, Any, Final, Literal

import msgspec
from msgspec import UNSET, Meta, Struct, UnsetType

__all__ = [
    "MAX_SAFE_INTEGER",
    "UNSET",
    "ApprovalRequest",
    "ContextState",
    "Message",
    "Pending",
    "Role",
    "SandboxMode",
    "SessionInfo",
    "StopReason",
    "TokenCount",
    "ToolCall",
    "TurnCompleted",
    "TurnResult",
    "TurnRunning",
    "TurnWaiting",
    "UnsetType",
    "Usage",
    "UtcDatetime",
    "format_timestamp",
    "in_utc",
    "new_id",
    "utc_now",
]

#: A timezone-aware instant; naive datetimes are refused by the decoder.
UtcDatetime = Annotated[datetime, Meta(tz=True)]

Role = Literal["system", "user", "assistant", "tool"]
PermissionMode = Literal["default", "acceptEdits", "plan", "bypassPermissions", "auto"]
#: How a session's model-run commands are confined (PROTOCOL.md §10.4).
SandboxMode = Literal["off", "read-only", "workspace-write"]


def utc_now() -> datetime:
    """Now, in UTC, at millisecond precision (what the wire carries)."""
    now = datetime.now(UTC)
    return now.replace(microsecond=now.microsecond // 1000 * 1000)


def in_utc(instant: datetime, member: str) -> datetime:
    """`instant` in UTC; a `ValueError` naming `member` (which msgspec reports as a located
    validation issue) when it has no UTC date: ``9999-12-31T23:59:59-05:00`` is in year
    10000, beyond what `datetime` holds. A Struct's ``__post_init__`` uses it."""
    if instant.utcoffset() == UTC.utcoffset(None):
        return instant
    try:
        return instant.astimezone(UTC)
    except OverflowError:
        problem = f"{member} is out of range: in UTC it falls outside years 1-9999"
        raise ValueError(problem) from None


def format_timestamp(instant: datetime) -> str:
    """`instant` as the wire writes it: ISO-8601 UTC ending in ``Z``, as msgspec encodes it."""
    return msgspec.json.encode(instant.astimezone(UTC)).decode()[1:-1]


def new_id(prefix: str = "") -> str:
    """A fresh random id, safe as a path segment (PROTOCOL.md §3)."""
    return f"{prefix}{uuid.uuid4().hex}"


class _Wire(Struct, rename="camel", forbid_unknown_fields=True):
    """Base of every mutable wire shape: camelCase names, unknown members refused."""


class _Frozen(Struct, rename="camel", forbid_unknown_fields=True, frozen=True):
    """Base of every immutable wire shape."""


class ToolCall(_Frozen, frozen=True, gc=False):
    """One tool call of an assistant message. `arguments` is always a JSON object; when the
    provider's argument text was not valid JSON it is kept verbatim in `raw_arguments` and
    `arguments` is ``{}`` (the call then gets a failed result)."""

    id: str
    name: str
    arguments: dict[str, Any]
    raw_arguments: str | UnsetType = UNSET


#: The largest integer every JSON reader holds exactly (2**53 - 1, JavaScript's
#: ``Number.MAX_SAFE_INTEGER``), and the bound of every count, size and duration robotad takes
#: (params, records, artifacts, configuration, a provider's usage). Past it a figure robotad
#: echoes reads back changed in an editor, and the arithmetic that makes a float of one
#: (context percentages, seconds) overflows long before Python's integers do.
MAX_SAFE_INTEGER: Final = 2**53 - 1

#: A number of tokens: never negative, never past `MAX_SAFE_INTEGER`.
TokenCount = Annotated[int, Meta(ge=0, le=MAX_SAFE_INTEGER)]


class Usage(_Frozen, frozen=True, gc=False):
    """Provider-reported token usage of one model call. No count is negative or past
    2**53 - 1 (`MAX_SAFE_INTEGER`): decoding refuses one (a script step's, an imported
    message's), and a provider that reports one is taken to have reported no usage."""

    input_tokens: TokenCount
    output_tokens: TokenCount
    total_tokens: TokenCount | UnsetType = UNSET

    @property
    def used(self) -> int:
        """`totalTokens` when the provider gave it, else input + output (PROTOCOL.md §4)."""
        if isinstance(self.total_tokens, int):
            return self.total_tokens
        return self.input_tokens + self.output_tokens


class Message(_Wire, gc=False):
    """One history entry. Conventions for the open `metadata` map:

    - ``metadata["ok"]`` (tool messages): false for a failed result.
    - ``metadata["usage"]`` (assistant messages): the `Usage` of the call that produced it.
    - ``metadata["peer"]`` (user messages): ``{"sessionId": ...}`` of a peer session that sent it.
    """

    # Messages, their tool calls and usage are untracked by the garbage collector (gc=False):
    # they hold JSON data only, never a reference back, so no cycle can run through them, and
    # the daemon's many loaded histories stop lengthening every full collection (90,000
    # messages: 21 -> 10 ms).

    id: str
    role: Role
    content: str | None
    state: Literal["complete", "interrupted"]
    timestamp: UtcDatetime
    tool_calls: list[ToolCall] | UnsetType = UNSET
    tool_call_id: str | UnsetType = UNSET
    name: str | UnsetType = UNSET
    metadata: dict[str, Any] | UnsetType = UNSET

    def __post_init__(self) -> None:
        self.timestamp = in_utc(self.timestamp, "timestamp")

    # -- constructors ---------------------------------------------------------------------

    @classmethod
    def system(cls, content: str) -> Message:
        return cls(new_id("m-"), "system", content, "complete", utc_now())

    @classmethod
    def user(cls, content: str, *, peer: str | None = None) -> Message:
        msg = cls(new_id("m-"), "user", content, "complete", utc_now())
        if peer is not None:
            msg.metadata = {"peer": {"sessionId": peer}}
        return msg

    @classmethod
    def assistant(
        cls,
        content: str | None,
        tool_calls: list[ToolCall] | None = None,
        *,
        usage: Usage | None = None,
        interrupted: bool = False,
    ) -> Message:
        msg = cls(
            new_id("m-"),
            "assistant",
            content,
            "interrupted" if interrupted else "complete",
            utc_now(),
        )
        if tool_calls:
            msg.tool_calls = list(tool_calls)
        if usage is not None:
            msg.metadata = {"usage": msgspec.to_builtins(usage)}
        return msg

    @classmethod
    def tool(
        cls, call_id: str, name: str, content: str, *, ok: bool, extra: dict[str, Any] | None = None
    ) -> Message:
        msg = cls(new_id("m-"), "tool", content, "complete", utc_now())
        msg.tool_call_id = call_id
        msg.name = name
        msg.metadata = {"ok": ok, **(extra or {})}
        return msg

    # -- readers --------------------------------------------------------------------------

    @property
    def usage(self) -> Usage | None:
        """The provider usage this message carries, if any."""
        if isinstance(self.metadata, dict) and isinstance(self.metadata.get("usage"), dict):
            try:
                return msgspec.convert(self.metadata["usage"], Usage)
            except msgspec.ValidationError:
                return None
        return None

    @property
    def ok(self) -> bool:
        """For a tool message: whether the result succeeded."""
        return not (isinstance(self.metadata, dict) and self.metadata.get("ok") is False)

    @property
    def peer(self) -> str | None:
        """For a user message a peer session sent: that session's id."""
        if isinstance(self.metadata, dict):
            peer = self.metadata.get("peer")
            if isinstance(peer, dict) and isinstance(peer.get("sessionId"), str):
                return str(peer["sessionId"])
        return None

    @property
    def calls(self) -> list[ToolCall]:
        return list(self.tool_calls) if isinstance(self.tool_calls, list) else []


class ContextState(_Frozen, frozen=True):
    used_tokens: int
    max_tokens: int
    used_percentage: float
    remaining_percentage: float

    @classmethod
    def of(cls, used: int, maximum: int) -> ContextState:
        """Percentages in 0–100 with two decimals (PROTOCOL.md §4)."""
        pct = 0.0 if maximum <= 0 else min(100.0, max(0.0, used * 100.0 / maximum))
        pct = round(pct, 2)
        return cls(used, maximum, pct, round(100.0 - pct, 2))


class ApprovalRequest(_Frozen, frozen=True):
    """The exact action a person is asked about: the tool and its effective arguments."""

    request_id: str
    execution_id: str
    tool: str
    arguments: dict[str, Any]
    reason: str


class Pending(_Frozen, frozen=True):
    """A parked execution. `uncertain` (PROTOCOL.md §10.2) lists the calls that were running
    when robotad stopped — their outcome is unknown; absent when there are none."""

    execution_id: str
    requests: list[ApprovalRequest]
    uncertain: list[str] | UnsetType = UNSET


class SessionInfo(_Wire):
    session_id: str
    cwd: str
    provider: str
    model: str
    permission_mode: PermissionMode
    created_at: str
    updated_at: str
    message_count: int
    turn_count: int
    running: bool
    pending: Pending | None
    context: ContextState
    #: PROTOCOL §10.2: the effective idle timeout of a model call (always set by robotad).
    idle_timeout_ms: int | UnsetType = UNSET
    #: The session's round limit (PROTOCOL §10.2), null when unlimited.
    max_rounds: int | None = None
    #: The project-instruction files added to the system prompt at session start, in order.
    instructions: list[str] | UnsetType = UNSET
    #: PROTOCOL §10.4: the session's sandbox mode.
    sandbox: SandboxMode = "off"


StopReason = Literal["end", "maxRounds"]


class TurnCompleted(_Frozen, frozen=True, tag_field="status", tag="completed"):
    """A completed turn. `stop_reason` is ``"end"`` when the model answered without tool calls,
    ``"maxRounds"`` when the turn's round limit stopped it (every tool call answered)."""

    turn_id: str
    response: str
    stop_reason: StopReason = "end"


class TurnWaiting(_Frozen, frozen=True, tag_field="status", tag="waiting"):
    turn_id: str
    execution_id: str
    requests: list[ApprovalRequest]


class TurnRunning(_Frozen, frozen=True, tag_field="status", tag="running"):
    """`session/run {wait:false}`'s immediate answer; the result follows as `turn_finished`."""

    turn_id: str


TurnResult = TurnCompleted | TurnWaiting
