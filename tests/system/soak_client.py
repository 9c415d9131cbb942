"""One soak client's connection: calls with an absolute bound, and its event streams checked.

`SoakConnection` wraps a `JsonRpcPeer` on the daemon socket. Every ``session/event`` it receives
is checked on arrival against the stream of that session on this connection (`EventStream`):
``seq`` strictly increasing by exactly one, the first one right after the ``latestSeq`` the
subscription answered, unless an ``overflow`` notice announced a cut (the client then
resubscribes with ``afterSeq`` and the stream must continue where it stopped). Whatever breaks
that rule is kept as a `StreamFault` for the final report, not raised inside the callback.

`call` bounds each request with `CALL_TIMEOUT`: a reply that never comes is a lost response,
raised as `LostResponse`. A connection that breaks (the daemon was killed) raises
`ConnectionGone` from `call`, whatever the layer that noticed it.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec
import trio

from protocol.client import open_connection
from protocol.peer import ConnectionLost, JsonRpcPeer

__all__ = [
    "CALL_TIMEOUT",
    "ConnectionGone",
    "EventStream",
    "LostResponse",
    "SoakConnection",
    "StreamFault",
    "connection_broke",
    "open_soak_connection",
]

#: A request unanswered for this long is a lost response.
CALL_TIMEOUT = 120.0

_BROKEN = (ConnectionLost, trio.BrokenResourceError, trio.ClosedResourceError, OSError)


class LostResponse(Exception):
    """A request got no reply within `CALL_TIMEOUT` on a live connection."""


class ConnectionGone(Exception):
    """The connection broke under a request (the daemon went away)."""


def connection_broke(exc: BaseException) -> bool:
    """Whether `exc` (possibly a group) says only that the connection or the daemon is gone."""
    if isinstance(exc, BaseExceptionGroup):
        return all(connection_broke(inner) for inner in exc.exceptions)
    return isinstance(exc, (*_BROKEN, ConnectionGone))


@dataclass(frozen=True)
class StreamFault:
    """An event that broke its stream's order: what was expected and what came."""

    session_id: str
    expected_seq: int | None
    got_seq: int
    note: str


@dataclass
class EventStream:
    """The events of one session on one connection since it subscribed."""

    session_id: str
    subscribed_after: int | None = None
    last_seq: int | None = None
    first_seq: int | None = None
    events: int = 0
    overflows: int = 0
    turn_finished: int = 0
    text_deltas: int = 0
    #: The seqs of the ``compaction`` events this stream saw complete.
    compactions: set[int] = field(default_factory=set)
    needs_resubscribe: bool = False
    #: Executions whose approvals this stream saw resolved (``approval_resolved``).
    resolved: set[str] = field(default_factory=set)
    changed: trio.Event = field(default_factory=trio.Event)

    @property
    def position(self) -> int:
        """The last seq this stream has accounted for (seen, or skipped by subscribing)."""
        if self.last_seq is not None:
            return self.last_seq
        return self.subscribed_after or 0

    def expected(self) -> int | None:
        if self.last_seq is not None:
            return self.last_seq + 1
        if self.subscribed_after is not None:
            return self.subscribed_after + 1
        return None

    def wake(self) -> None:
        self.changed.set()
        self.changed = trio.Event()


class SoakConnection:
    """A connection of one soak client (see the module docstring)."""

    def __init__(self, peer: JsonRpcPeer) -> None:
        self.peer = peer
        self.streams: dict[str, EventStream] = {}
        self.faults: list[StreamFault] = []
        self.requests = 0
        #: The request waiting for its reply, if any (for diagnosing a hang).
        self.in_flight: str | None = None

    def stream(self, session_id: str) -> EventStream:
        if session_id not in self.streams:
            self.streams[session_id] = EventStream(session_id)
        return self.streams[session_id]

    def on_notification(self, method: str, params: msgspec.Raw) -> None:
        if method != "session/event":
            return
        event: dict[str, Any] = msgspec.json.decode(params)
        stream = self.stream(str(event.get("sessionId")))
        if event.get("type") == "overflow":
            stream.overflows += 1
            stream.needs_resubscribe = True
            stream.wake()
            return
        seq = event.get("seq")
        if not isinstance(seq, int):
            self.faults.append(StreamFault(stream.session_id, stream.expected(), -1, "no seq"))
            return
        expected = stream.expected()
        if expected is None:
            stream.first_seq = seq  # arrived before the subscription's answer; checked there
        elif seq != expected:
            note = "duplicate or reordered" if seq < expected else "gap"
            self.faults.append(StreamFault(stream.session_id, expected, seq, note))
        if stream.last_seq is None or seq > stream.last_seq:
            stream.last_seq = seq
        stream.events += 1
        if event.get("type") == "turn_finished":
            stream.turn_finished += 1
        elif event.get("type") == "text_delta":
            stream.text_deltas += 1
        elif event.get("type") == "compaction" and event.get("phase") == "completed":
            stream.compactions.add(seq)
        elif event.get("type") == "approval_resolved":
            stream.resolved.add(str(event.get("executionId")))
        stream.wake()

    async def call(self, method: str, params: dict[str, Any]) -> Any:
        """The result; the daemon's error as its `RpcError` class; `LostResponse` past
        `CALL_TIMEOUT`; `ConnectionGone` when the connection broke."""
        self.requests += 1
        self.in_flight = f"{method} {params.get('sessionId', '')}"
        try:
            with trio.fail_after(CALL_TIMEOUT):
                return await self.peer.request(method, params)
        except trio.TooSlowError:
            raise LostResponse(f"{method} {params} unanswered after {CALL_TIMEOUT}s") from None
        except _BROKEN as exc:
            raise ConnectionGone(f"{method}: {type(exc).__name__}") from None
        finally:
            self.in_flight = None

    async def subscribe(self, session_id: str) -> None:
        """Subscribe (again, after an overflow: from the last seq seen)."""
        stream = self.stream(session_id)
        after = stream.last_seq if stream.needs_resubscribe else None
        params: dict[str, Any] = {"sessionId": session_id}
        if after is not None:
            params["afterSeq"] = after
        stream.needs_resubscribe = False
        latest = (await self.call("session/subscribe", params))["latestSeq"]
        if after is None:
            stream.subscribed_after = latest
            if stream.first_seq is not None and stream.first_seq != latest + 1:
                fault = StreamFault(session_id, latest + 1, stream.first_seq, "gap at subscribe")
                self.faults.append(fault)

    async def wait_for_seq(self, session_id: str, seq: int) -> bool:
        """Wait (the caller bounds it) until this connection saw `seq` of the session."""
        stream = self.stream(session_id)
        while stream.position < seq:
            await stream.changed.wait()
        return True


@asynccontextmanager
async def open_soak_connection(socket_path: Path) -> AsyncIterator[SoakConnection]:
    """A `SoakConnection` for the block; `ConnectionGone` when the daemon is not there."""
    holder: list[SoakConnection] = []

    def route(method: str, params: msgspec.Raw) -> None:
        holder[0].on_notification(method, params)

    try:
        async with open_connection(os.fspath(socket_path), on_notification=route) as peer:
            connection = SoakConnection(peer)
            holder.append(connection)
            yield connection
    except BaseExceptionGroup as group:
        if connection_broke(group):
            raise ConnectionGone("connection broke") from None
        raise
    except _BROKEN as exc:
        raise ConnectionGone(type(exc).__name__) from None
