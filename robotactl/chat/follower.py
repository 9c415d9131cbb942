"""The session's event stream, applied to the chat's state and screen.

`EventFollower.on_notification` is the connection's notification callback: it decodes every
``session/event`` (PROTOCOL.md §6) and queues it. `run` takes them one by one and, for events
of the attached session newer than the last one applied, updates `ChatState` and prints what
a person should see: another client's prompt, the model's text (streamed into the live area,
printed as Markdown when a block ends — at a tool call, an approval or the turn's end), each
tool call as one line with its outcome (a denied call, which never starts, with the denial's
reason), approval requests (and their disappearance when answered elsewhere), compaction, the
turn's end. Everything shown comes from these events. The model's text is made visible as it
streams (`VisibleStream`: prompt_toolkit, which draws the live area, shows C0 and C1 controls
as ``^[`` and ``<9b>`` itself, but sends bidi controls as they are), the rest by the `Renderer`.

`follow(session_id)` subscribes (dropping the previous session's subscription); an
``overflow`` notice is answered by resubscribing after the last applied ``seq`` (a line says
so when the daemon's buffer lost events meanwhile).
"""

from __future__ import annotations

import contextlib
import math
from typing import TYPE_CHECKING, Any

import msgspec
import trio

from protocol.errors import EventsLost, RpcError
from protocol.events import (
    EVENT_METHOD,
    ApprovalRequested,
    ApprovalResolved,
    Compaction,
    ContextUpdated,
    Overflow,
    PermissionDecided,
    SessionClosed,
    SessionEvent,
    TextDelta,
    ToolFinished,
    ToolStarted,
    TurnFinished,
    TurnStarted,
)
from protocol.jsonrpc import ConnectionLost, MalformedResponse
from protocol.methods import HistoryResult, SubscribeResult
from robotactl.chat.render import Renderer, describe_call
from robotactl.chat.screen import Screen
from robotactl.chat.state import ChatState, ToolCallRecord
from robotactl.terminal_text import VisibleStream

if TYPE_CHECKING:
    from protocol.peer import JsonRpcPeer

__all__ = ["EventFollower"]

_decoder: msgspec.json.Decoder[SessionEvent] = msgspec.json.Decoder(SessionEvent)
#: How far back from the history's end a denied call's assistant message is looked for: it
#: is the latest assistant message, behind at most the results of its calls decided before.
_CALL_LOOKBACK = 20


class EventFollower:
    """Applies the attached session's events (see the module docstring)."""

    def __init__(self, state: ChatState, screen: Screen, renderer: Renderer) -> None:
        self.state = state
        self.screen = screen
        self.renderer = renderer
        self.peer: JsonRpcPeer | None = None
        self.last_seq = 0
        #: Calls decided "ask" whose approval request has not come yet, in order.
        self._asking: list[str] = []
        #: The arguments of calls a person was asked about, by call id (from the request:
        #: a denied call never starts, so no `ToolStarted` carries them).
        self._asked: dict[str, dict[str, Any]] = {}
        #: A call denied before anyone was asked (a deny rule, a hook): no event carries its
        #: arguments, so `run` reads them from the history before showing it.
        self._denied_unseen: ToolCallRecord | None = None
        #: The streamed text made visible delta by delta, into the live area.
        self._text = VisibleStream()
        self._send, self._receive = trio.open_memory_channel[Any](math.inf)

    def on_notification(self, method: str, params: msgspec.Raw) -> None:
        """The connection's notification callback: queue decoded events, drop the rest."""
        if method != EVENT_METHOD:
            return
        try:
            self._send.send_nowait(_decoder.decode(params))
        except msgspec.DecodeError:
            return  # an event type this client does not know

    async def follow(self, session_id: str, previous: str | None) -> None:
        """Subscribe to `session_id` (from now on) and drop `previous`'s subscription."""
        assert self.peer is not None
        if previous and previous != session_id:
            # A closed or deleted session has no subscription left to drop.
            with contextlib.suppress(RpcError):
                await self.peer.request("session/unsubscribe", {"sessionId": previous})
        result = await self.peer.request(
            "session/subscribe", {"sessionId": session_id}, result_type=SubscribeResult
        )
        self.last_seq = result.latest_seq
        self._asking, self._asked = [], {}
        self._text = VisibleStream()

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Apply queued events until cancelled."""
        task_status.started()
        async for event in self._receive:
            if isinstance(event, Overflow):
                if event.session_id == self.state.session_id:
                    await self._resubscribe()
                continue
            if event.session_id != self.state.session_id or event.seq <= self.last_seq:
                continue
            self.last_seq = event.seq
            self.apply(event)
            if (denied := self._denied_unseen) is not None:
                self._denied_unseen = None
                session_id = self.state.session_id
                denied.arguments = await self._arguments_of(denied.call_id)
                if self.state.session_id == session_id:  # not switched away meanwhile
                    self.screen.print(self.renderer.tool_line(denied))
            self.screen.refresh()

    def apply(self, event: Any) -> None:
        """Update the state with one event of the attached session and show it."""
        state = self.state
        if event.turn_id is not None and not isinstance(event, TurnFinished | SessionClosed):
            state.turn_started(event.turn_id)
        if isinstance(event, TurnStarted):
            self._asking, self._asked = [], {}
            if event.turn_id not in state.own_turns:
                self.screen.print(self.renderer.prompt_echo(event.prompt, other_client=True))
        elif isinstance(event, TextDelta):
            state.live_text += self._text.feed(event.text)
        elif isinstance(event, ToolStarted):
            self.flush_text()
            state.calls[event.call_id] = ToolCallRecord(event.call_id, event.tool, event.arguments)
        elif isinstance(event, PermissionDecided):
            self._decided(event)
        elif isinstance(event, ToolFinished):
            self._tool_finished(event)
        elif isinstance(event, ApprovalRequested):
            self.flush_text()
            state.add_requests(event.requests)
            # robotad decides "ask" on each call, in order, then asks about them all at once.
            for call_id, request in zip(self._asking, event.requests, strict=False):
                self._asked[call_id] = request.arguments
            self._asking = self._asking[len(event.requests) :]
            for request in event.requests:
                self.screen.print(
                    self.renderer.approval(request.tool, request.arguments, request.reason)
                )
        elif isinstance(event, ApprovalResolved):
            self._resolved(event)
        elif isinstance(event, ContextUpdated):
            state.set_context(event.context)
        elif isinstance(event, Compaction):
            self.screen.print(
                self.renderer.notice(f"⋯ compaction ({event.trigger}): {event.phase}")
            )
        elif isinstance(event, TurnFinished):
            self._turn_finished(event)
        elif isinstance(event, SessionClosed):
            self.flush_text()
            state.turn_ended()
            self.screen.print(self.renderer.notice("robotad closed this session"))

    def flush_text(self) -> None:
        """Print the streamed text as Markdown and empty the live area."""
        self.state.live_text += self._text.end()
        text = self.state.take_live_text()
        if text.strip():
            self.screen.print(self.renderer.markdown(text))

    def _decided(self, event: PermissionDecided) -> None:
        """Note the decision on its call. A call denied before it started never runs (no
        `ToolFinished` follows), so it is shown and kept for ``/last`` here, its arguments
        taken from the request that asked about it (or, denied without asking, from the
        history: `run` shows it then)."""
        if event.decision == "ask":
            self._asking.append(event.call_id)
        started = self.state.calls.get(event.call_id)
        if started is not None:
            started.decision = event.decision
            return
        if event.decision != "deny":
            return
        self.flush_text()
        asked = self._asked.pop(event.call_id, None)
        call = ToolCallRecord(event.call_id, event.tool, asked or {})
        call.decision = event.decision
        call.ok = False
        call.preview = f"denied: {event.reason}" if event.reason else "denied"
        self.state.last_call = call
        if asked is None and self.peer is not None:
            self._denied_unseen = call
        else:
            self.screen.print(self.renderer.tool_line(call))

    async def _arguments_of(self, call_id: str) -> dict[str, Any]:
        """The arguments of `call_id` as the model gave them: its assistant message is in
        the history before any of its calls is decided. Empty when it cannot be read."""
        assert self.peer is not None
        session = {"sessionId": self.state.session_id}
        gone = (ConnectionLost, MalformedResponse, trio.BrokenResourceError)
        with contextlib.suppress(RpcError, *gone):
            total = (
                await self.peer.request(
                    "session/history", {**session, "limit": 0}, result_type=HistoryResult
                )
            ).total
            tail = await self.peer.request(
                "session/history",
                {**session, "offset": max(0, total - _CALL_LOOKBACK)},
                result_type=HistoryResult,
            )
            for message in reversed(tail.messages):
                for call in message.tool_calls or ():
                    if call.id == call_id:
                        return dict(call.arguments)
        return {}

    def _tool_finished(self, event: ToolFinished) -> None:
        denied = self.state.last_call
        if denied is not None and denied.call_id == event.call_id and denied.decision == "deny":
            return  # already shown when it was denied
        call = self.state.calls.pop(event.call_id, None) or ToolCallRecord(
            event.call_id, event.tool, {}
        )
        call.ok = event.ok
        call.preview = event.preview
        self.state.last_call = call
        self.screen.print(self.renderer.tool_line(call))

    def _resolved(self, event: ApprovalResolved) -> None:
        waiting = [r for r in self.state.pending if r.request_id == event.request_id]
        if not self.state.drop_request(event.request_id):
            return  # answered here: already said
        verdict = "approved" if event.approved else "denied"
        what = describe_call(waiting[0].tool, waiting[0].arguments, self.screen.width() - 30)
        self.screen.print(self.renderer.notice(f"{verdict} elsewhere: {what}"))

    def _turn_finished(self, event: TurnFinished) -> None:
        self.flush_text()
        self.state.turn_ended()
        if event.status == "aborted":
            self.screen.print(self.renderer.error("turn aborted"))
        elif event.status == "failed":
            error = event.error
            detail = "" if isinstance(error, msgspec.UnsetType) else f": {error.message}"
            self.screen.print(self.renderer.error(f"turn failed{detail}"))
        elif event.status == "waiting":
            # The prompt area asks the question with its keys; the scrollback keeps a mark.
            self.screen.print(self.renderer.notice("waiting for approval"))
        if not isinstance(event.hook_failures, msgspec.UnsetType):
            for failure in event.hook_failures:
                text = f"hook {failure.event} failed: {failure.reason}"
                self.screen.print(self.renderer.error(text))

    async def _resubscribe(self) -> None:
        assert self.peer is not None
        session_id = self.state.session_id
        params = {"sessionId": session_id, "afterSeq": self.last_seq}
        try:
            await self.peer.request("session/subscribe", params, result_type=SubscribeResult)
        except EventsLost:
            self.screen.print(self.renderer.error("(this client fell behind; events were lost)"))
            await self.follow(session_id, None)
