"""Where a session tells the world what happened: its event sink and its session log.

Neither is a persistence barrier (G-098): a sink or a log that raises is noted in the daemon's
own log and ignored, so it can neither hold back nor undo anything a turn did. After the
session has shut down nothing more is emitted or logged (G-131).

No log line's sidecar is stored on the event loop (architecture decisions 62 and 76): `log`
places its line (`SessionLogger.place`), and a line naming a sidecar the log does not hold yet
(a tool result, a reply or a history over the spill limit) has it stored on a worker thread by
a task of its own, the lines logged meanwhile waiting behind it. `turn_finished` goes out once
every line logged before it is written (`written`), so the log holds the whole turn by then.

Events are the wire's own Structs (`protocol.events`, the one definition of every event), built
with ``seq`` = `UNSTAMPED`: the daemon's event hub stamps the real one when it publishes. Log
entries are the payload Structs of `robotad.storage.log_events`, so a payload the reader would
refuse cannot be built here.

`logged_request` is what a ``provider_request`` entry holds of a model call (G-144). A turn's
request is the session's whole history, which the log already holds as ``history_mutation``
events (G-145), so it is recorded by reference — the history's first ``count`` messages, the
last one's id, and the system context inserted into them — and a turn's log line stays the same
size however long the conversation grows. Anything else is logged in full.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from typing import Any, Final, Literal

import msgspec
import trio

from protocol import events as wire
from protocol.errors import RpcError
from protocol.shapes import ApprovalRequest, ContextState, Message, StopReason
from robotad.agent.provider import ModelRequest
from robotad.session.hooks.runner import HookFailure
from robotad.session.ports import EventSink
from robotad.storage import log_events
from robotad.storage.failure import StorageError
from robotad.storage.log_events import LogEventName
from robotad.storage.session_log import PendingLine, SessionLogger

__all__ = ["PREVIEW_CHARS", "UNSTAMPED", "SessionReporter", "logged_request"]

logger = logging.getLogger("robotad.session")

#: The ``seq`` of an event not yet published; the event hub stamps each event's real one.
UNSTAMPED: Final = 0

#: How much of a tool result `tool_finished.preview` shows.
PREVIEW_CHARS: Final = 200

Phase = Literal["started", "completed", "failed", "aborted"]
Status = Literal["completed", "waiting", "aborted", "failed"]


class SessionReporter:
    """One session's event sink and session log, both optional and both never raising."""

    def __init__(
        self, session_id: str, logger_: SessionLogger | None, sink: EventSink | None
    ) -> None:
        self.session_id = session_id
        self._log = logger_
        self._sink = sink
        self._closed = False
        #: Entries the session log refused since the last `turn_finished`, and the last why.
        self._dropped = 0
        self._log_failure: StorageError | None = None

    @property
    def closed(self) -> bool:
        """Whether the session has shut down: nothing more is emitted or logged (G-131)."""
        return self._closed

    @closed.setter
    def closed(self, value: bool) -> None:
        """Closing also releases the session log's open file (no descriptor outlives the
        session); a close that fails is reported and ignored."""
        self._closed = value
        if value and self._log is not None:
            try:
                self._log.close()
            except Exception:
                logger.warning("closing the session log of %s failed", self.session_id)

    # -- plumbing ---------------------------------------------------------------------------

    def log(self, event: LogEventName, payload: msgspec.Struct) -> None:
        """Write one session-log entry; a failing log is reported and ignored. On the event
        loop, an entry naming a sidecar the log does not hold yet is placed, and its sidecar
        stored on a worker thread by a task started for it (`store_pending`), every entry
        logged meanwhile waiting behind it; elsewhere (a worker thread) it is stored here."""
        if self._closed or self._log is None:
            return
        if not trio.lowlevel.in_trio_task():
            try:
                self._log.log(event, payload)
            except Exception as exc:
                self._note_failure(event, exc)
            return
        pending = self.place(event, payload)
        if pending is not None:
            # A system task: the store outlives whatever logged the entry (a turn's nursery,
            # a cancelled request), as a store that started must (`store_pending`).
            trio.lowlevel.spawn_system_task(self.store_pending, pending, name="session log store")

    async def store_and_log(self, event: LogEventName, payload: msgspec.Struct) -> None:
        """`log` for an entry that may name a sidecar not stored yet: the sidecar is created
        on a worker thread, never on the event loop, and entries logged meanwhile are written
        after this one (`SessionLogger.store_and_log`)."""
        pending = self.place(event, payload)
        if pending is not None:
            await self.store_pending(pending)

    def place(self, event: LogEventName, payload: msgspec.Struct) -> PendingLine | None:
        """`log` up to a sidecar to store: the entry takes its place in the log now, and is
        written now when it needs none; otherwise it is returned, and the caller must hand
        it to `store_pending` (`SessionLogger.place`). A failing log is reported, and None
        returned."""
        if self._closed or self._log is None:
            return None
        try:
            return self._log.place(event, payload)
        except Exception as exc:
            self._note_failure(event, exc)
            return None

    async def store_pending(self, pending: PendingLine) -> None:
        """Store a placed entry's sidecars on a worker thread, then write it and what waits
        behind it. Also after the session has shut down: the entry was logged before, and
        what waits behind it must not wait for good. A failure is reported and ignored, each
        entry dropped counted (several raise together: `SessionLogger.store_pending`)."""
        if self._log is None:
            return
        try:
            await self._log.store_pending(pending)
        except ExceptionGroup as group:
            for exc in group.exceptions:
                self._note_failure(pending.event, exc)
        except Exception as exc:
            self._note_failure(pending.event, exc)

    async def written(self) -> None:
        """Return once every entry logged so far is written (or dropped, reported): at once,
        without a checkpoint, when none waits for its sidecars; otherwise shielded, as the
        stores it waits for always end (`SessionLogger.store_pending`)."""
        if self._log is not None:
            with trio.CancelScope(shield=True):
                await self._log.written()

    def _note_failure(self, event: LogEventName, exc: Exception) -> None:
        """Report a log that refused an entry: the disk's refusal counted (and named by the
        next ``turn_finished``), any other failure noted in the daemon's log."""
        if isinstance(exc, StorageError):
            if self._dropped == 0:
                logger.error(
                    "session log of %s cannot be appended (%s); entries are dropped until it can",
                    self.session_id,
                    exc,
                )
            self._dropped += 1
            self._log_failure = exc
        else:
            logger.warning("session log write failed (%s); entry dropped", event, exc_info=exc)

    def emit(self, event: wire.SessionEvent) -> None:
        """Hand one event to the sink; a failing sink is reported and ignored."""
        if self._closed or self._sink is None:
            return
        try:
            self._sink(event)
        except Exception:
            kind = type(event).__name__
            logger.warning("event sink raised on %s; event dropped", kind, exc_info=True)

    # -- events of PROTOCOL §6 -------------------------------------------------------------

    def turn_started(self, turn_id: str, prompt: str) -> None:
        self.emit(wire.TurnStarted(self.session_id, UNSTAMPED, turn_id, prompt=prompt))
        self.log("turn_started", log_events.TurnStartedEntry(turn_id=turn_id))

    def text_delta(self, turn_id: str | None, text: str, request_id: str | None) -> None:
        self.emit(wire.TextDelta(self.session_id, UNSTAMPED, turn_id, text=text))
        payload = log_events.TextDeltaEntry(text=text)
        if request_id is not None:
            payload.request_id = request_id
        self.log("text_delta", payload)

    def tool_call(self, call_id: str, tool: str, args: dict[str, Any]) -> None:
        """A call reached the gate with these effective arguments (log only)."""
        self.log("tool_call", log_events.ToolCallEntry(call_id=call_id, tool=tool, arguments=args))

    def tool_started(
        self, turn_id: str | None, call_id: str, tool: str, arguments: dict[str, Any]
    ) -> None:
        self.emit(
            wire.ToolStarted(
                self.session_id, UNSTAMPED, turn_id, call_id=call_id, tool=tool, arguments=arguments
            )
        )

    def permission_decided(
        self,
        turn_id: str | None,
        call_id: str,
        tool: str,
        decision: Literal["allow", "ask", "deny"],
        reason: str,
    ) -> None:
        self.emit(
            wire.PermissionDecided(
                self.session_id,
                UNSTAMPED,
                turn_id,
                call_id=call_id,
                tool=tool,
                decision=decision,
                reason=reason or msgspec.UNSET,
            )
        )
        payload = log_events.PermissionDecisionEntry(call_id=call_id, tool=tool, decision=decision)
        if reason:
            payload.reason = reason
        self.log("permission_decision", payload)

    def tool_finished(
        self, turn_id: str | None, call_id: str, tool: str, ok: bool, content: str | None
    ) -> None:
        preview = (content or "")[:PREVIEW_CHARS]
        self.emit(
            wire.ToolFinished(
                self.session_id,
                UNSTAMPED,
                turn_id,
                call_id=call_id,
                tool=tool,
                ok=ok,
                preview=preview,
            )
        )

    def tool_result(self, call_id: str, tool: str, ok: bool, content: str | None) -> None:
        """A tool result entered history, or a direct call settled (log only)."""
        self.log(
            "tool_result",
            log_events.ToolResultEntry(call_id=call_id, tool=tool, ok=ok, content=content),
        )

    def approval_requested(
        self, turn_id: str | None, execution_id: str, requests: list[ApprovalRequest]
    ) -> None:
        self.emit(
            wire.ApprovalRequested(
                self.session_id, UNSTAMPED, turn_id, execution_id=execution_id, requests=requests
            )
        )
        self.log(
            "approval_requested",
            log_events.ApprovalRequestedEntry(
                execution_id=execution_id, requests=msgspec.to_builtins(requests)
            ),
        )

    def approval_resolved(
        self, turn_id: str | None, execution_id: str, request_id: str, approved: bool
    ) -> None:
        self.emit(
            wire.ApprovalResolved(
                self.session_id,
                UNSTAMPED,
                turn_id,
                execution_id=execution_id,
                request_id=request_id,
                approved=approved,
            )
        )
        self.log(
            "approval_resolved",
            log_events.ApprovalResolvedEntry(
                execution_id=execution_id, request_id=request_id, approved=approved
            ),
        )

    def context_updated(
        self, turn_id: str | None, phase: Literal["estimated", "exact"], state: ContextState
    ) -> None:
        self.emit(wire.ContextUpdated.of(self.session_id, UNSTAMPED, turn_id, phase, state))
        self.log(
            "context_update",
            log_events.ContextUpdateEntry(
                phase=phase, used_tokens=state.used_tokens, max_tokens=state.max_tokens
            ),
        )

    def compaction(
        self, turn_id: str | None, trigger: Literal["manual", "auto"], phase: Phase
    ) -> None:
        self.emit(
            wire.Compaction(self.session_id, UNSTAMPED, turn_id, trigger=trigger, phase=phase)
        )
        self.log("context_compact", log_events.ContextCompactEntry(trigger=trigger, phase=phase))

    async def turn_finished(
        self,
        turn_id: str,
        status: Status,
        *,
        response: str | None = None,
        stop_reason: StopReason | None = None,
        error: RpcError | None = None,
        hook_failures: Iterable[HookFailure] = (),
    ) -> None:
        """Emit ``turn_finished`` once every line logged before it is written (`written`:
        the log holds the whole turn when a client hears it ended, and a line dropped
        meanwhile is counted in its ``logFailure``)."""
        await self.written()
        failures = [wire.HookFailure(event=f.event, reason=f.reason) for f in hook_failures]
        log_failure: wire.LogFailure | msgspec.UnsetType = msgspec.UNSET
        if self._log_failure is not None:
            failure = self._log_failure
            log_failure = wire.LogFailure(failure.path, failure.reason, self._dropped)
            self._dropped, self._log_failure = 0, None
        self.emit(
            wire.TurnFinished(
                self.session_id,
                UNSTAMPED,
                turn_id,
                status=status,
                response=msgspec.UNSET if response is None else response,
                stop_reason=msgspec.UNSET if stop_reason is None else stop_reason,
                error=msgspec.UNSET if error is None else _error_object(error),
                hook_failures=failures or msgspec.UNSET,
                log_failure=log_failure,
            )
        )

    def hook_failures(self, failures: Iterable[HookFailure]) -> None:
        for failure in failures:
            self.log(
                "hook_failure",
                log_events.HookFailureEntry(event=failure.event, reason=failure.reason),
            )


def logged_request(
    request: ModelRequest, history: Sequence[Message], system_context: str | None
) -> dict[str, Any]:
    """The ``request`` member of a ``provider_request`` log entry for `request`.

    Every member of the request as sent (snake_case, as `msgspec.to_builtins` gives them), except
    its messages when they are a prefix of `history` — the session's history, which the log's
    ``history_mutation`` events rebuild up to this entry — with at most `system_context`
    inserted after its leading system messages, as the loop inserts it. Then ``messages`` is
    left out and ``history_prefix: {count, last_message_id}`` (the id only when count > 0)
    names them, with ``system_context: {index, message}`` for the inserted message. Otherwise
    ``messages`` holds them all.
    """
    messages = request.messages
    inserted: int | None = None
    if system_context:
        inserted = _leading_system(history)
        candidate = messages[inserted] if inserted < len(messages) else None
        if candidate is None or candidate.role != "system" or candidate.content != system_context:
            return _in_full(request)
        messages = [*messages[:inserted], *messages[inserted + 1 :]]
    count = len(messages)
    if count > len(history) or messages != history[:count]:
        return _in_full(request)
    form: dict[str, Any] = msgspec.to_builtins(msgspec.structs.replace(request, messages=[]))
    del form["messages"]
    prefix: dict[str, Any] = {"count": count}
    if count:
        prefix["last_message_id"] = messages[-1].id
    form["history_prefix"] = prefix
    if inserted is not None:
        form["system_context"] = {
            "index": inserted,
            "message": msgspec.to_builtins(request.messages[inserted]),
        }
    return form


def _in_full(request: ModelRequest) -> dict[str, Any]:
    form: dict[str, Any] = msgspec.to_builtins(request)
    return form


def _leading_system(history: Sequence[Message]) -> int:
    count = 0
    while count < len(history) and history[count].role == "system":
        count += 1
    return count


def _error_object(error: RpcError) -> wire.ErrorObject:
    """`error` as ``turn_finished.error`` carries it: the error the requester got."""
    return msgspec.convert(error.to_wire(), wire.ErrorObject)
