"""Following one turn as it happens: its events streamed to the terminal, Ctrl-C as an abort.

`follow_turn` subscribes to the session, starts the caller's request (``session/run`` or
``session/resume``, waiting for its `TurnResult`) and, while that request is out, renders
every event of the turn through a `TurnView`: model text on stdout as it streams, tool calls,
permission decisions and tool outcomes as short dim lines on stderr, all of it made visible
(`robotactl.terminal_text`: no escape sequence or bidi control of a model reaches the
terminal). It returns the request's result once the turn's own ``turn_finished`` has been
shown too (events and the reply travel separately, so the last events may trail the reply a
little), or re-raises the request's error (`TurnAborted`, `ProviderFailed`, …).

Which events are the turn's: those the subscription delivers after the ``latestSeq`` it
answered with, and — when the caller knows the turn id — carrying that ``turnId``. An
``overflow`` notice (this client fell behind) is answered by resubscribing from the last
``seq`` shown, so nothing is skipped unless the daemon's replay buffer lost it too (then a
line says so).

Ctrl-C while following sends ``session/abort`` once and keeps following until the turn has
stopped (its request then fails with `TurnAborted`); a second Ctrl-C stops waiting at once
(`StoppedWaiting`, exit 4) — the daemon still finishes the abort on its own
(`robotactl.interrupts`, which ``compact`` shares).

Imported only by the commands that run turns (it loads trio and msgspec).
"""

from __future__ import annotations

import math
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any, Final

import msgspec
import trio

from protocol.errors import EventsLost, RpcError
from protocol.events import (
    EVENT_METHOD,
    ApprovalResolved,
    Compaction,
    Overflow,
    PermissionDecided,
    SessionEvent,
    TextDelta,
    ToolFinished,
    ToolStarted,
    TurnFinished,
)
from protocol.methods import SubscribeResult
from robotactl.formatting import format_call, shorten
from robotactl.interrupts import StoppedWaiting, abort_on_interrupt
from robotactl.terminal_text import VisibleStream
from robotactl.waiting import QUIET_BEFORE, TICK, WaitingLine

if TYPE_CHECKING:
    from protocol.methods import RunResult
    from protocol.peer import JsonRpcPeer
    from robotactl.render import Output

__all__ = ["FINISH_GRACE", "EventRelay", "StoppedWaiting", "TurnView", "follow_turn"]

#: Seconds to wait, after the reply, for the turn's trailing events (its ``turn_finished``).
FINISH_GRACE: Final = 2.0
#: Longest tool-result preview shown on one line.
PREVIEW_WIDTH: Final = 100

_decoder: msgspec.json.Decoder[SessionEvent] = msgspec.json.Decoder(SessionEvent)


class _CallDone:
    """Queued after the last event the request's task saw: the reply is in."""


_CALL_DONE: Final = _CallDone()


class EventRelay:
    """The connection's notification callback: decodes ``session/event`` params and queues
    them for the one `follow_turn` attached at the time. Notifications of other methods, and
    events of a type this client does not know, are dropped. Never blocks (the queue is
    unbounded on this side; the daemon bounds what it sends, PROTOCOL.md §6)."""

    def __init__(self) -> None:
        self._send: trio.MemorySendChannel[object] | None = None

    def __call__(self, method: str, params: msgspec.Raw) -> None:
        if method != EVENT_METHOD or self._send is None:
            return
        try:
            event = _decoder.decode(params)
        except msgspec.DecodeError:
            return
        self._send.send_nowait(event)

    def attach(self) -> tuple[trio.MemorySendChannel[object], trio.MemoryReceiveChannel[object]]:
        send, receive = trio.open_memory_channel[object](math.inf)
        self._send = send
        return send, receive

    def detach(self) -> None:
        self._send = None


class TurnView:
    """Renders a turn's events for a person.

    Text goes to stdout as it streams (not in JSON mode, where stdout carries only the final
    result); everything else is one dim line on stderr (not in JSON mode either). Before such
    a line, a text line left open is ended, so the answer and the activity never share a line.
    The text is made visible as it streams (`VisibleStream`), each activity line by `side`.
    A failed turn's ``turn_finished`` shows nothing: the request's own error says it, once.
    Any turn's ``turn_finished`` shows the hooks that failed in it (a line each): advisory
    hooks never fail the turn, so this is where their failure is seen.
    """

    def __init__(
        self, output: Output, *, show_text: bool, waiting: WaitingLine | None = None
    ) -> None:
        self.output = output
        self.show_text = show_text
        #: `time.monotonic()` when the turn last showed something (for the waiting line).
        self.shown_at = time.monotonic()
        #: Whether any model text of this turn was written to stdout.
        self.streamed = False
        #: Whether any model text of this turn arrived (shown or not, as in JSON mode).
        self.received_text = False
        #: Whether events of the turn were lost (this client fell further behind than robotad's
        #: replay buffer): the text shown has a gap, so the reply is printed whole at the end.
        self.lost_events = False
        self._open_line = False
        self._visible = VisibleStream()
        #: "needs approval" lines held back by call id: shown with the next event that is not
        #: a decision, dropped when the same call's decision comes first (a resumed approval
        #: re-checks the call: ask, then allowed — approved).
        self._asks: dict[str, str] = {}
        self._waiting = waiting
        #: Tools started and not finished, by call id (what the turn is waiting for then).
        self._running: dict[str, str] = {}

    def event(self, event: Any) -> None:
        """Show one event of the turn."""
        self.shown_at = time.monotonic()
        if not isinstance(event, PermissionDecided):
            self._show_held_asks()
        if isinstance(event, TextDelta):
            self.received_text = self.received_text or bool(event.text)
            self._text(event.text)
        elif isinstance(event, ToolStarted):
            self._running[event.call_id] = event.tool
            self.activity(f"→ {format_call(event.tool, event.arguments)}")
        elif isinstance(event, PermissionDecided):
            self._decision(event)
        elif isinstance(event, ToolFinished):
            self._running.pop(event.call_id, None)
            mark, style = ("✓", "dim") if event.ok else ("✗", "red")
            self.activity(f"  {event.tool} {mark} {shorten(event.preview, PREVIEW_WIDTH)}", style)
        elif isinstance(event, ApprovalResolved):
            verdict = "approved" if event.approved else "denied"
            self.activity(f"  {verdict} {event.request_id}")
        elif isinstance(event, Compaction):
            self.activity(f"⋯ compaction ({event.trigger}): {event.phase}")
        elif isinstance(event, TurnFinished) and not isinstance(
            event.hook_failures, msgspec.UnsetType
        ):
            # Advisory hooks that failed never fail the turn: say so, once each.
            for failure in event.hook_failures:
                self.activity(f"hook {failure.event} failed: {failure.reason}", "yellow")

    def _text(self, text: str) -> None:
        if not self.show_text or not text:
            return
        self.streamed = True
        shown = self._visible.feed(text)
        if not shown:
            return  # a carriage return, held until the next delta says what it was
        self.clear_waiting()
        self.output.write(shown)
        self._open_line = not shown.endswith("\n")

    def _decision(self, event: PermissionDecided) -> None:
        reason = "" if isinstance(event.reason, msgspec.UnsetType) else f" — {event.reason}"
        if event.decision == "ask":
            self._asks[event.call_id] = f"  {event.tool}: needs approval{reason}"
            return
        self._asks.pop(event.call_id, None)
        if event.decision == "allow":
            self.activity(f"  {event.tool}: allowed{reason}")
        else:
            self.activity(f"  {event.tool}: denied{reason}", "red")

    def _show_held_asks(self) -> None:
        asks, self._asks = self._asks, {}
        for line in asks.values():
            self.activity(line, "yellow")

    def activity(self, text: str, *styles: str) -> None:
        """One line of activity on stderr, after ending an open text line; none in JSON mode,
        where stderr carries only an error, as JSON."""
        self.end_line()
        if not self.output.json_mode:
            self.clear_waiting()
            self.output.side(text, *styles)

    def show_waiting(self, seconds: float) -> None:
        """Draw (or redraw) the waiting line — unless a text line is open on stdout, whose
        line it would overwrite. Only with a `WaitingLine` set (a terminal)."""
        if self._waiting is not None and not self._open_line:
            running = list(self._running.values())
            self._waiting.draw(seconds, running[-1] if running else "the model")

    def clear_waiting(self) -> None:
        if self._waiting is not None:
            self._waiting.clear()

    def end_line(self) -> None:
        """End the text line left open on stdout, if any (after ``^M`` for a carriage return
        that ended the text)."""
        held = self._visible.end()
        if held or self._open_line:
            self.output.write(held + "\n")
            self._open_line = False


@dataclass
class _Following:
    """What `follow_turn` knows so far."""

    last_seq: int
    turn_id: str | None
    seen: bool = False
    finished: bool = False

    def accepts(self, event: Any) -> bool:
        if event.seq <= self.last_seq:
            return False
        self.last_seq = event.seq
        return self.turn_id is None or event.turn_id == self.turn_id


async def follow_turn(
    peer: JsonRpcPeer,
    relay: EventRelay,
    session_id: str,
    start: Callable[[], Awaitable[RunResult]],
    view: TurnView,
    *,
    turn_id: str | None = None,
    grace: float = FINISH_GRACE,
    replay: bool = False,
) -> RunResult:
    """Subscribe to `session_id`, run `start()` and show the turn's events until it is done.

    `turn_id`, when known, narrows the events shown to that turn's. With `replay` (and a
    `turn_id`: joining a turn that may be running) the subscription starts from the oldest
    buffered event, so the turn's earlier events are shown first. Returns what `start`
    returned; re-raises its `RpcError`. `relay` must be the connection's notification
    callback. Raises `StoppedWaiting` on a second Ctrl-C.
    """
    send, receive = relay.attach()
    try:
        if replay and turn_id is not None:
            after = await _subscribe_from_oldest(peer, session_id)
        else:
            subscribed = await peer.request(
                "session/subscribe", {"sessionId": session_id}, result_type=SubscribeResult
            )
            after = subscribed.latest_seq
        state = _Following(after, turn_id)
        outcome: list[RunResult] = []
        failure: list[RpcError] = []

        async def call() -> None:
            try:
                outcome.append(await start())
            except RpcError as exc:
                failure.append(exc)
            finally:
                send.send_nowait(_CALL_DONE)

        async with trio.open_nursery() as nursery:
            # Ctrl-C is an abort from before the request goes out (`abort_on_interrupt`).
            await nursery.start(
                partial(
                    abort_on_interrupt,
                    what="the turn",
                    say=view.activity,
                    before_stopping=view.end_line,
                ),
                peer,
                session_id,
            )
            nursery.start_soon(call)
            nursery.start_soon(_show_waiting, view)
            await _show_events(peer, session_id, receive, state, view, grace)
            nursery.cancel_scope.cancel()
    finally:
        relay.detach()
        view.clear_waiting()
    if failure:
        raise failure[0]
    return outcome[0]


async def _show_events(
    peer: JsonRpcPeer,
    session_id: str,
    receive: trio.MemoryReceiveChannel[object],
    state: _Following,
    view: TurnView,
    grace: float,
) -> None:
    """Render events until the reply is in and the turn's ``turn_finished`` was shown (or
    `grace` seconds pass after the reply without it, or no event of the turn came at all)."""
    deadline = math.inf
    while True:
        item: object = None
        with trio.move_on_at(deadline):
            item = await receive.receive()
        if item is None:
            return  # the grace ran out
        if item is _CALL_DONE:
            if state.finished or not state.seen:
                return
            deadline = trio.current_time() + grace
            continue
        if isinstance(item, Overflow):
            await _resubscribe(peer, session_id, state, view)
            continue
        if not state.accepts(item):
            continue
        state.seen = True
        view.event(item)
        if isinstance(item, TurnFinished):
            state.finished = True
            if deadline != math.inf:
                return


async def _subscribe_from_oldest(peer: JsonRpcPeer, session_id: str) -> int:
    """Subscribe with every buffered event replayed; the seq the replay starts after."""
    try:
        await peer.request(
            "session/subscribe",
            {"sessionId": session_id, "afterSeq": 0},
            result_type=SubscribeResult,
        )
    except EventsLost as exc:
        oldest = exc.data.get("oldestSeq") if isinstance(exc.data, dict) else None
        if not isinstance(oldest, int) or oldest < 1:
            raise
        params = {"sessionId": session_id, "afterSeq": oldest - 1}
        await peer.request("session/subscribe", params, result_type=SubscribeResult)
        return oldest - 1
    return 0


async def _show_waiting(view: TurnView) -> None:
    """Keep the waiting line up to date while the turn shows nothing (see
    `robotactl.waiting`); cancelled when following ends."""
    while True:
        await trio.sleep(TICK)
        quiet = time.monotonic() - view.shown_at
        if quiet >= QUIET_BEFORE:
            view.show_waiting(quiet)


async def _resubscribe(
    peer: JsonRpcPeer, session_id: str, state: _Following, view: TurnView
) -> None:
    """After an overflow: pick up from the last event shown (replayed from the buffer)."""
    params: dict[str, Any] = {"sessionId": session_id, "afterSeq": state.last_seq}
    try:
        await peer.request("session/subscribe", params, result_type=SubscribeResult)
    except EventsLost:
        view.lost_events = True
        view.activity(
            "(some of this turn's events were lost; its reply is printed whole when it ends)",
            "yellow",
        )
        again = await peer.request(
            "session/subscribe", {"sessionId": session_id}, result_type=SubscribeResult
        )
        state.last_seq = again.latest_seq
