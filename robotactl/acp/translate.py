"""robotad's ``session/event``s and history as ACP ``session/update``s — sans-I/O.

`EventTranslator` holds one session's translation state; `updates_for(event)` returns the
updates an event becomes, in order:

- ``text_delta`` → ``agent_message_chunk``;
- ``turn_started`` of a turn another client started → ``user_message_chunk`` (the editor that
  prompted shows its own prompt already);
- a tool call → one ``tool_call`` when it is first known with its arguments — at its
  ``approval_requested`` (status ``pending``) or its ``tool_started`` (``in_progress``) —
  then ``tool_call_update``s: ``in_progress`` when it starts after an approval, ``completed``
  / ``failed`` with the result when it finishes, ``failed`` with the reason when it is
  denied (a denied call that was never shown becomes a failed ``tool_call``);
- ``context_updated`` → ``usage_update {used, size}`` when the figures changed;
- ``turn_finished`` aborted or failed → a ``failed`` ``tool_call_update`` for each call shown
  and never finished (a cancel while a command ran), so no call stays "in progress".

robotad's approval requests carry the tool and arguments but not the call id; the call is the
one the same tool last got an ``ask`` decision for (`call_id_for` tells the prompt driver).
Everything else (compaction, turn ends, closes) becomes no update.

`replay_history` turns ``session/history`` messages into the updates ``session/load`` sends.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Final

from protocol.events import (
    ApprovalRequested,
    ContextUpdated,
    PermissionDecided,
    SessionEvent,
    TextDelta,
    ToolFinished,
    ToolStarted,
    TurnFinished,
    TurnStarted,
)
from protocol.shapes import ApprovalRequest, Message
from robotactl.acp.schema import (
    AgentMessageChunk,
    SessionUpdate,
    TextBlock,
    ToolCall,
    ToolCallUpdate,
    ToolStatus,
    UsageUpdate,
    UserMessageChunk,
)
from robotactl.acp.tool_view import ReadCurrent, ToolView, describe_call, result_content

__all__ = ["REPLAY_RESULT_CHARS", "EventTranslator", "replay_history"]


#: The longest tool result a replayed ``tool_call`` shows (events carry a preview anyway).
REPLAY_RESULT_CHARS: Final = 2000


class EventTranslator:
    """One session's events → ACP updates. `own_turns` holds the turns this editor started
    (their prompts are not echoed back); `read_current` reads a file for a Write's diff."""

    def __init__(self, *, read_current: ReadCurrent | None = None) -> None:
        self.own_turns: set[str] = set()
        self._read_current = read_current
        self._shown: dict[str, ToolView] = {}
        #: Calls shown and not yet finished or denied.
        self._open: set[str] = set()
        self._asked: dict[str, str] = {}  # call id → tool, awaiting its approval request
        self._call_of_request: dict[str, str] = {}
        self._usage: tuple[int, int] | None = None

    def call_id_for(self, request: ApprovalRequest) -> str:
        """The ``toolCallId`` the editor knows the call of `request` by: the call its event
        or a replay showed (the latest of that tool still waiting), else the request's id."""
        known = self._call_of_request.get(request.request_id)
        if known is not None:
            return known
        call_id = next(
            (call for call, tool in reversed(self._asked.items()) if tool == request.tool), None
        )
        if call_id is None:
            return request.request_id
        self._asked.pop(call_id, None)
        self._call_of_request[request.request_id] = call_id
        return call_id

    def replay(self, messages: Iterable[Message]) -> list[SessionUpdate]:
        """`replay_history`'s updates, the calls still waiting for their result kept as
        shown and open: a parked approval's question then names the call the editor was
        shown, its end updates that call, and an abandon closes it."""
        history = list(messages)
        answered = {m.tool_call_id for m in history if m.role == "tool"}
        for message in history:
            for call in message.calls if message.role == "assistant" else ():
                if call.id not in answered:
                    self._shown[call.id] = describe_call(call.name, call.arguments)
                    self._open.add(call.id)
                    self._asked[call.id] = call.name
        return replay_history(history)

    def close_open(self, why: str) -> list[SessionUpdate]:
        """Every call shown and not finished, closed as failed because `why`."""
        closed, self._open = sorted(self._open), set()
        for call in closed:
            self._asked.pop(call, None)
        return [
            ToolCallUpdate(call, status="failed", content=result_content(f"interrupted: {why}"))
            for call in closed
        ]

    def close_abandoned(self, results: Iterable[Message], why: str) -> list[SessionUpdate]:
        """The calls an abandon closed, each failed with the result robotad recorded for it
        (`results`: the messages the abandon added) — a call whose outcome a stop of robotad
        made unknown says so, never that it did not run; a call the editor was never shown
        (resumed without a replay) is shown now. Any other call still open is closed because
        `why`."""
        updates: list[SessionUpdate] = []
        for message in results:
            call = message.tool_call_id
            if message.role != "tool" or not isinstance(call, str):
                continue
            text = message.content or ""
            self._asked.pop(call, None)
            if call in self._shown:
                if call in self._open:
                    self._open.discard(call)
                    updates.append(
                        ToolCallUpdate(call, status="failed", content=result_content(text))
                    )
                continue
            view = describe_call(message.name if isinstance(message.name, str) else "tool", {})
            self._shown[call] = view
            updates.append(_tool_call(call, view, {}, "failed", text))
        return [*updates, *self.close_open(why)]

    def view_of(self, call_id: str) -> ToolView | None:
        return self._shown.get(call_id)

    def updates_for(self, event: SessionEvent) -> list[SessionUpdate]:
        """The updates `event` becomes (often none)."""
        if isinstance(event, TextDelta):
            return [AgentMessageChunk(TextBlock(event.text))] if event.text else []
        if isinstance(event, TurnStarted):
            if event.turn_id in self.own_turns or not event.prompt:
                return []
            return [UserMessageChunk(TextBlock(event.prompt))]
        if isinstance(event, PermissionDecided):
            return self._decided(event)
        if isinstance(event, ApprovalRequested):
            return [update for request in event.requests for update in self._requested(request)]
        if isinstance(event, ToolStarted):
            return self._started(event)
        if isinstance(event, ToolFinished):
            return self._finished(event)
        if isinstance(event, ContextUpdated):
            return self._context(event)
        if isinstance(event, TurnFinished) and event.status in ("aborted", "failed"):
            return self.close_open(
                "the turn was aborted" if event.status == "aborted" else "the turn failed"
            )
        return []

    # -- tool calls -------------------------------------------------------------------------

    def _decided(self, event: PermissionDecided) -> list[SessionUpdate]:
        if event.decision == "ask":
            if event.call_id not in self._shown:
                self._asked.pop(event.call_id, None)
                self._asked[event.call_id] = event.tool  # latest ask last
            return []
        if event.decision == "allow":
            return []
        self._asked.pop(event.call_id, None)
        reason = event.reason if isinstance(event.reason, str) else f"{event.tool} was denied"
        if event.call_id not in self._shown:
            view = describe_call(event.tool, {})
            self._shown[event.call_id] = view
            return [
                ToolCall(
                    event.call_id,
                    view.title,
                    view.kind,
                    "failed",
                    content=result_content(reason),
                )
            ]
        self._open.discard(event.call_id)
        return [ToolCallUpdate(event.call_id, status="failed", content=result_content(reason))]

    def _requested(self, request: ApprovalRequest) -> list[SessionUpdate]:
        call_id = next(
            (call for call, tool in reversed(self._asked.items()) if tool == request.tool),
            request.request_id,
        )
        self._asked.pop(call_id, None)
        self._call_of_request[request.request_id] = call_id
        if call_id in self._shown:
            return []
        return [self._show(call_id, request.tool, request.arguments, "pending")]

    def _started(self, event: ToolStarted) -> list[SessionUpdate]:
        self._asked.pop(event.call_id, None)
        if event.call_id in self._shown:
            return [ToolCallUpdate(event.call_id, status="in_progress")]
        return [self._show(event.call_id, event.tool, event.arguments, "in_progress")]

    def _finished(self, event: ToolFinished) -> list[SessionUpdate]:
        self._open.discard(event.call_id)
        status: ToolStatus = "completed" if event.ok else "failed"
        if event.call_id not in self._shown:  # a call that could not run: never started
            view = describe_call(event.tool, {})
            self._shown[event.call_id] = view
            return [_tool_call(event.call_id, view, {}, status, event.preview)]
        shown = self._shown.get(event.call_id)
        diff = shown.diff if shown is not None else []
        return [
            ToolCallUpdate(
                event.call_id, status=status, content=[*diff, *result_content(event.preview)]
            )
        ]

    def _show(
        self, call_id: str, tool: str, arguments: dict[str, Any], status: ToolStatus
    ) -> ToolCall:
        view = describe_call(tool, arguments, read_current=self._read_current)
        self._shown[call_id] = view
        self._open.add(call_id)
        return _tool_call(call_id, view, arguments, status)

    def _context(self, event: ContextUpdated) -> list[SessionUpdate]:
        usage = (max(event.used_tokens, 0), max(event.max_tokens, 0))
        if usage == self._usage:
            return []
        self._usage = usage
        return [UsageUpdate(*usage)]


def _tool_call(
    call_id: str,
    view: ToolView,
    arguments: Mapping[str, Any],
    status: ToolStatus,
    result: str | None = None,
) -> ToolCall:
    content = [*view.diff, *result_content(result or "")]
    return ToolCall(
        call_id,
        view.title,
        view.kind,
        status,
        raw_input=dict(arguments),
        locations=list(view.locations),
        content=content,
    )


def replay_history(messages: Iterable[Message]) -> list[SessionUpdate]:
    """The updates that show a stored conversation: user and assistant text as message
    chunks, each tool call as one ``tool_call`` carrying its outcome (``pending`` while it has
    no result, e.g. a parked approval). System and tool messages add nothing of their own."""
    history = list(messages)
    results = {
        message.tool_call_id: message
        for message in history
        if message.role == "tool" and isinstance(message.tool_call_id, str)
    }
    updates: list[SessionUpdate] = []
    for message in history:
        if message.role == "user" and message.content:
            updates.append(UserMessageChunk(TextBlock(message.content)))
        elif message.role == "assistant":
            if message.content:
                updates.append(AgentMessageChunk(TextBlock(message.content)))
            for call in message.calls:
                outcome = results.get(call.id)
                status: ToolStatus = (
                    "pending" if outcome is None else "completed" if outcome.ok else "failed"
                )
                text = (outcome.content or "")[:REPLAY_RESULT_CHARS] if outcome else None
                view = describe_call(call.name, call.arguments)
                updates.append(_tool_call(call.id, view, call.arguments, status, text))
    return updates
