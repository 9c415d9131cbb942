"""One robotad session as this editor follows it: its event stream, forwarded as updates.

An `Attachment` is made when the editor creates, loads or resumes a session. robotad's
``session/event`` notifications for it are handed to `deliver` (from the connection's reader:
never blocks) and `run` — the attachment's one forwarder task — translates each, in ``seq``
order, into ``session/update`` notifications for the editor. Whoever started a turn (this
editor, a terminal, another editor), its text and tool calls reach every editor attached.

A prompt waits on its turn through `watch_turn`: the forwarder passes the turn's
``approval_requested``, ``approval_resolved`` and ``turn_finished`` events to the watcher only
after it has written the updates they became, so a prompt's answer never overtakes its
updates. An ``overflow`` notice (this subscriber fell behind robotad's queue) resubscribes from
the last event seen; events already forwarded are skipped by ``seq``.
"""

from __future__ import annotations

import logging
import math
from collections import deque
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager

import trio

from protocol.errors import EventsLost, RpcError
from protocol.events import (
    ApprovalRequested,
    ApprovalResolved,
    Overflow,
    SessionEvent,
    TurnFinished,
    TurnStarted,
)
from protocol.peer import JsonRpcPeer
from robotactl.acp.schema import SessionUpdate
from robotactl.acp.translate import EventTranslator
from robotactl.current_text import read_small_text

__all__ = ["Attachment", "TurnEvent", "TurnEvents"]

logger = logging.getLogger("robotactl.acp")

TurnEvent = TurnStarted | ApprovalRequested | ApprovalResolved | TurnFinished
SendUpdate = Callable[[str, SessionUpdate], Awaitable[None]]


class TurnEvents:
    """The events of one turn, in order, for the prompt that waits on it. An event read too
    early can be put back (`push_back`) to be read again first; `fail` makes the next
    `receive` raise (a request for the turn failed before any event could say so)."""

    def __init__(self) -> None:
        self._send, self._receive = trio.open_memory_channel[TurnEvent | RpcError](math.inf)
        self._held: deque[TurnEvent] = deque()

    def put(self, event: TurnEvent) -> None:
        self._send.send_nowait(event)

    def fail(self, error: RpcError) -> None:
        self._send.send_nowait(error)

    async def receive(self) -> TurnEvent:
        if self._held:
            return self._held.popleft()
        item = await self._receive.receive()
        if isinstance(item, RpcError):
            raise item
        return item

    def push_back(self, event: TurnEvent) -> None:
        self._held.appendleft(event)


class Attachment:
    """The editor's view of session `session_id` (whose cwd is `cwd`), over `robotad`.

    `send_update` writes one update to the editor. `mode` is the permission mode the editor
    was last told of.
    """

    def __init__(
        self, session_id: str, cwd: str, mode: str, robotad: JsonRpcPeer, send_update: SendUpdate
    ) -> None:
        self.session_id = session_id
        self.cwd = cwd
        self.mode = mode
        self.translator = EventTranslator(read_current=read_small_text)
        self._robotad = robotad
        self._send_update = send_update
        self._inbox_send, self._inbox = trio.open_memory_channel[SessionEvent](math.inf)
        self._watchers: dict[str, TurnEvents] = {}
        self._last_seq = 0
        self._scope = trio.CancelScope()
        self._forwarding = False

    async def show(self, updates: list[SessionUpdate]) -> None:
        """Send `updates` to the editor (what no event of robotad's says: a replay, an
        abandon's closing of the calls it left)."""
        for update in updates:
            await self._send_update(self.session_id, update)

    @property
    def forwarding(self) -> bool:
        """Whether `run` has started (an attachment has one forwarder, started once)."""
        return self._forwarding

    def deliver(self, event: SessionEvent) -> None:
        """Queue an event robotad sent for this session (never blocks)."""
        self._inbox_send.send_nowait(event)

    async def subscribe(self) -> None:
        """Subscribe this connection to the session's new events."""
        await self._robotad.request("session/subscribe", {"sessionId": self.session_id})

    def detach(self) -> None:
        """Stop forwarding (the session itself stays in robotad)."""
        self._scope.cancel()

    @contextmanager
    def watch_turn(self, turn_id: str) -> Iterator[TurnEvents]:
        """The events of turn `turn_id` from now on, while the block runs."""
        events = self._watchers[turn_id] = TurnEvents()
        try:
            yield events
        finally:
            del self._watchers[turn_id]

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Forward events as updates until detached. A failure to write to the editor (it is
        gone) propagates."""
        if self._forwarding:
            raise RuntimeError("an attachment has one forwarder")
        self._forwarding = True
        with self._scope:
            task_status.started()
            async for event in self._inbox:
                if isinstance(event, Overflow):
                    await self._resubscribe()
                    continue
                if event.seq <= self._last_seq:
                    continue  # replayed after a resubscription: already forwarded
                self._last_seq = event.seq
                for update in self.translator.updates_for(event):
                    await self._send_update(self.session_id, update)
                watcher = self._watchers.get(event.turn_id or "")
                if watcher is not None and isinstance(
                    event, TurnStarted | ApprovalRequested | ApprovalResolved | TurnFinished
                ):
                    watcher.put(event)

    async def _resubscribe(self) -> None:
        params = {"sessionId": self.session_id, "afterSeq": self._last_seq}
        try:
            await self._robotad.request("session/subscribe", params)
        except EventsLost:
            logger.warning(
                "session %s: events after seq %d are no longer buffered; some updates are lost",
                self.session_id,
                self._last_seq,
            )
            await self.subscribe()
