"""What a Session needs from outside and hands back: its ports and result shapes.

- `SessionStorePort.save(snapshot)` persists a `SessionSnapshot` — the members of the record a
  session owns (G-011: the store keeps every other member). `NullStore` is the Null Object used
  when no store is configured: persistence is silently skipped and no file is written (G-212).
- `EventSink` receives each session event as its `protocol.events` Struct, with ``seq`` not yet
  stamped (the daemon's event hub stamps it). It is synchronous and must not block.
- `PermissionHandler` is a live approver for in-process `run`: it gets the exact action as an
  `ApprovalRequest` and answers with a bool or an `ApprovalAnswer` (which may ask to remember
  the consent for the session or the project). Without one, a call needing approval is denied
  (G-118).
- `CompactOutcome` is the result of ``compact``: ``{compacted, before, after}``.
- `Denial` (from the permission enforcer) is one refused call, for ``recent_denials``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from msgspec import UNSET, Struct

from protocol.events import SessionEvent
from protocol.shapes import ApprovalRequest, ContextState, Message
from robotad.agent.provider import Provider, ToolSchema
from robotad.sandbox.policy import UNCONFINED, SandboxPolicy
from robotad.session.permissions.enforcer import Denial
from robotad.storage.record import (
    Permissions,
    SessionRecord,
    SessionSettings,
    StoredToolSchema,
)

__all__ = [
    "ApprovalAnswer",
    "CompactOutcome",
    "Denial",
    "EventSink",
    "NullStore",
    "PermissionHandler",
    "SessionCallbacks",
    "SessionSnapshot",
    "SessionStorePort",
]


@dataclass(frozen=True)
class SessionCallbacks:
    """What a session's collaborators read from, or tell, the Session itself: the current
    provider and effort (both can change between turns), saving (`save` logs a failure and
    answers whether it saved; `persist` raises it) and counting a completed turn."""

    provider: Callable[[], Provider]
    effort: Callable[[], str | None]
    save: Callable[[], Awaitable[bool]]
    persist: Callable[[], Awaitable[None]]
    completed: Callable[[], None]


#: Receives one event dict; synchronous, never blocks (the manager stamps seq and fans out).
EventSink = Callable[[SessionEvent], None]


class ApprovalAnswer(Struct, frozen=True):
    """A person's answer to one live approval. `remember` "session" or "project" grants
    "allow always" for this call's argument (G-113); a project grant that cannot be persisted
    rejects the approval (G-114). `remember` is ignored on a denial."""

    approved: bool
    remember: Literal["once", "session", "project"] = "once"
    reason: str = ""


#: A live approver: the exact action in, an answer out. Cancelled when the turn is aborted.
PermissionHandler = Callable[[ApprovalRequest], Awaitable[ApprovalAnswer | bool]]


class SessionSnapshot(Struct, frozen=True):
    """The session-owned members of a stored record, as the session holds them now."""

    session_id: str
    cwd: str
    messages: list[Message]
    system_prompt: str | None
    tool_schemas: list[ToolSchema]
    provider: str
    model: str
    permission_mode: str
    permissions: dict[str, list[str]]
    auto_compact_threshold: float | Literal[False]
    turn_count: int
    context_window: int | None = None
    idle_timeout_ms: int | None = None
    max_rounds: int | None = None
    instructions: list[str] | None = None
    #: A scripted provider's unconsumed steps (wire form), so a reload continues the script.
    script: list[dict[str, Any]] | None = None
    sandbox: SandboxPolicy = UNCONFINED

    def to_record(self, *, created_at: str, updated_at: str) -> SessionRecord:
        """A full record from this snapshot; members the session does not own are empty (the
        store keeps the stored ones on save)."""
        settings = SessionSettings(
            provider=self.provider,
            model=self.model,
            permission_mode=self.permission_mode,  # type: ignore[arg-type]
            permissions=Permissions(
                allow=list(self.permissions.get("allow", [])),
                ask=list(self.permissions.get("ask", [])),
                deny=list(self.permissions.get("deny", [])),
            ),
            auto_compact_threshold=self.auto_compact_threshold,
            context_window=UNSET if self.context_window is None else self.context_window,
            idle_timeout_ms=UNSET if self.idle_timeout_ms is None else self.idle_timeout_ms,
            max_rounds=UNSET if self.max_rounds is None else self.max_rounds,
            instructions=UNSET if self.instructions is None else list(self.instructions),
            script=UNSET if self.script is None else self.script,
            sandbox=self.sandbox if self.sandbox.confined else UNSET,
        )
        return SessionRecord(
            id=self.session_id,
            cwd=self.cwd,
            created_at=created_at,
            updated_at=updated_at,
            messages=list(self.messages),
            history=[],
            system_prompt=self.system_prompt,
            tool_schemas=[
                StoredToolSchema(s.name, s.description, s.input_schema) for s in self.tool_schemas
            ],
            settings=settings,
            turn_count=self.turn_count,
            metadata={},
        )


class SessionStorePort(Protocol):
    """Persists a session's snapshot durably; raises on failure."""

    async def save(self, snapshot: SessionSnapshot) -> None: ...


class NullStore:
    """No persistence: every save is silently skipped (G-212)."""

    async def save(self, snapshot: SessionSnapshot) -> None:
        del snapshot


class CompactOutcome(Struct, frozen=True):
    """``session/compact``'s result. `compacted` is False when there was nothing to summarise
    (then `before` equals `after`)."""

    compacted: bool
    before: ContextState
    after: ContextState
