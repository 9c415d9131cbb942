"""One session's event stream: seq stamping, a bounded replay buffer and fan-out (PROTOCOL §6).

`EventHub.publish` is what a Session's ``event_sink`` calls from inside a turn: it is
synchronous, never blocks and never waits for a subscriber. It stamps ``sessionId`` and the next
``seq`` (strictly increasing for the hub's lifetime; the manager passes ``next_seq`` when it
rebuilds a hub for a reloaded session so seq never goes backwards within the process, and
`first_seq_after_restart` for a session an earlier process served, so a seq a client kept from
that process is never taken for one of this process's), keeps the
event in a bounded replay buffer (`replay.ReplayBuffer`, which compresses all but the newest
events) and offers it to every subscriber's bounded queue.

Each subscriber has a delivery task in the hub's nursery (`EventHub.run`) that awaits the
subscriber's ``send(event)`` — in the daemon, the connection's
``peer.notify("session/event", event)`` — one event at a time, in seq order:

- A subscriber whose queue is full when an event arrives is unsubscribed at once; its task
  delivers what it had queued, then ONE ``{type:"overflow", sessionId, latestSeq}`` notice, and
  ends. It never slows `publish` or another subscriber; it resubscribes with ``afterSeq``.
- A subscriber whose ``send`` raises (its connection is gone) is dropped without a word.
- A subscriber key names one destination (one connection's subscription to this session). On
  that key seqs only ever go up: a new subscription waits for the previous one's last send to
  finish and skips whatever the previous one already delivered. Subscribing again without
  ``after_seq`` takes over the previous subscription's queue, so nothing is lost or repeated.
  `unsubscribe` ends that: the next subscription on the key still waits for the last send,
  then replays from its ``after_seq`` what was sent before (PROTOCOL §6).

A ``send`` the socket takes at once passes no checkpoint (the daemon's uses
``notify(..., checkpoint=False)``): the task's wait for its next event is its one round of the
event loop per event, and a long backlog lets other tasks run every `_SENDS_PER_ROUND` sends.

A delivery task woken by new events first lets the loop settle (`_Subscription.settle`): it
waits, at most `SETTLE_WAIT`, until no other task can run — until the work that published the
events waits for the disk, a model or a person — and then sends all that is pending. A turn's
events thus go out while its record is being saved, not between its steps (decision 38 of
docs/architecture.md). ``turn_finished`` and ``session_closed`` go at once: a client waits for a
turn's end beside its reply.

Events are plain dicts shaped as `protocol.events` describes (``sessionId``, ``seq``, ``turnId``
— null outside a turn — ``type`` and the type's members). The same dict goes to every subscriber
(and to the buffer's open chunk; a replay from a sealed chunk hands out equal copies): consumers
treat it as read-only.

Its size is one concept: stamping, buffering and delivering one session's events, whose order,
overflow and hand-over rules only hold together.
"""

from __future__ import annotations

import logging
import os
import time
from collections import deque
from collections.abc import Awaitable, Callable, Hashable, Mapping
from typing import Any, Final, Literal

import msgspec
import trio

# trio's wait for an idle loop, public as `trio.testing.wait_all_tasks_blocked` (the same
# function; tests/daemon/test_event_hub.py checks it): imported from where it lives, because
# `trio.testing` imports pytest wherever pytest is installed.
from trio._core._generated_run import wait_all_tasks_blocked as wait_until_idle

from protocol.errors import EventsLost
from protocol.events import Overflow, SessionClosed, SessionEvent
from robotad.daemon.replay import ReplayBuffer
from robotad.log import fields

__all__ = [
    "DEFAULT_BUFFER_SIZE",
    "DEFAULT_SUBSCRIBER_QUEUE",
    "Event",
    "EventHub",
    "Send",
    "first_seq_after_restart",
    "stamp",
]

log = logging.getLogger("robotad.daemon.events")

#: Events a session's replay buffer keeps (``--event-buffer N``).
DEFAULT_BUFFER_SIZE: Final = 10_000
#: Live events one subscriber may have waiting before it overflows.
DEFAULT_SUBSCRIBER_QUEUE: Final = 1024


def first_seq_after_restart() -> int:
    """The first seq of a session this process did not create (it was stored by an earlier
    one): the microseconds since the epoch, plus one. An earlier process numbered that
    session's events from a smaller start at fewer than one event a microsecond, so its seqs
    all lie below; a client's ``afterSeq`` from it is then older than the buffer (-32012)
    instead of silently skipping this process's first events. Within 2**53 until year 2255."""
    return time.time_ns() // 1000 + 1


#: Longest a woken delivery task waits for the event loop to settle (`_Subscription.settle`).
SETTLE_WAIT: Final = 0.001
#: Events that never wait for the loop to settle: a turn's end and the stream's.
_AT_ONCE: Final = frozenset({"turn_finished", "session_closed"})

#: Events one delivery task sends back to back, at most, before it lets other tasks run (a send
#: the socket takes at once passes no checkpoint: a replayed backlog would hold the loop).
_SENDS_PER_ROUND: Final = 64

#: One ``session/event`` params object; shared, so read-only for everyone but the hub.
Event = dict[str, Any]
#: Delivers one event to a subscriber; raising means the subscriber is gone. It need not pass
#: a checkpoint once done: the delivery loop waits for the next event, or checkpoints itself.
Send = Callable[[Event], Awaitable[object]]


#: Set to anything but "" or "0" to have every published event decoded with the clients' strict
#: Structs (`protocol.events.SessionEvent`); a failure is logged and kept in `shape_violations`.
#: The test suite sets it for every daemon it runs, in process or not.
CHECK_EVENTS_ENV: Final = "ROBOTA_CHECK_EVENTS"
#: The log line that marks a violation (the suite looks for it in a daemon's output).
SHAPE_VIOLATION: Final = "event does not decode as the protocol's SessionEvent"
#: Violations found in this process while `CHECK_EVENTS_ENV` was set.
shape_violations: list[str] = []


def check_shape(event: Event) -> None:
    """Decode `event` as a client would (strict `SessionEvent`); record and log a failure."""
    try:
        msgspec.convert(event, SessionEvent)
    except msgspec.ValidationError as exc:
        shape_violations.append(f"{event!r}: {exc}")
        log.error("%s: %s (%r)", SHAPE_VIOLATION, exc, event)


def stamp(event_fields: Mapping[str, Any], session_id: str, seq: int) -> Event:
    """The published form of an event: its members with the hub's ``sessionId`` and ``seq``
    (overriding any given) and ``turnId`` null unless given."""
    event: Event = {"sessionId": session_id, "seq": seq, "turnId": None}
    event.update(event_fields)
    event["sessionId"] = session_id
    event["seq"] = seq
    return event


_State = Literal["active", "ending", "overflowed", "retired"]


class _Subscription:
    """One subscriber's queue and delivery state, driven by `EventHub._deliver`.

    `pending` holds the events not yet taken for delivery: first the replayed backlog (the
    first `backlog_left` of them), then live events, at most `limit` of which may wait.
    States: "active" receives events; "ending" (hub closed) and "overflowed" deliver what is
    pending and stop, the latter after its overflow notice; "retired" (unsubscribed, replaced
    or failed) stops before its next event.
    """

    def __init__(
        self,
        key: Hashable,
        send: Send,
        backlog: list[Event],
        limit: int,
        predecessor: _Subscription | None,
    ) -> None:
        self.key = key
        self.send = send
        self.pending: deque[Event] = deque(backlog)
        self.backlog_left = len(backlog)
        self.limit = limit
        self.predecessor = predecessor
        self.state: _State = "active"
        self.overflow_seq = 0
        #: The highest seq handed to `send` (or skipped as already delivered on this key).
        self.last_seq = 0
        #: Set by `EventHub.unsubscribe`: the next subscription on the key skips nothing.
        self.unsubscribed = False
        self.finished = trio.Event()
        self._wakeup = trio.Event()
        #: The wait of `settle` in progress, cut short by an event that goes at once.
        self._settling: trio.CancelScope | None = None

    def offer(self, event: Event, *, force: bool = False) -> bool:
        """Queue a live event; False (nothing queued) when the live queue is full."""
        if not force and len(self.pending) - self.backlog_left >= self.limit:
            return False
        self.pending.append(event)
        self._wakeup.set()
        if self._settling is not None and self._urgent():
            self._settling.cancel()
        return True

    def _urgent(self) -> bool:
        """Whether what is pending must go without letting the loop settle: an event that
        goes at once came last, or a quarter of the live queue is taken (a producer that
        keeps the loop busy must not overflow it: the task woken runs within the producer's
        next step or the one after)."""
        live = len(self.pending) - self.backlog_left
        return self.pending[-1]["type"] in _AT_ONCE or 4 * live >= self.limit

    def take(self) -> Event | None:
        """The next event to deliver, or None when there is none (now, or ever if retired)."""
        if self.state == "retired" or not self.pending:
            return None
        if self.backlog_left:
            self.backlog_left -= 1
        return self.pending.popleft()

    def hand_over(self) -> list[Event]:
        """Retire, giving up the events not yet taken (for the subscription replacing this)."""
        taken = list(self.pending)
        self.stop("retired")
        return taken

    def stop(self, state: _State) -> None:
        self.state = state
        if state == "retired":
            self.pending.clear()
        self._wakeup.set()
        if self._settling is not None:
            self._settling.cancel()

    async def wait_for_more(self) -> None:
        """Return once an event is pending or the subscription stopped receiving."""
        if self.pending or self.state != "active":
            return
        self._wakeup = trio.Event()
        await self._wakeup.wait()

    async def settle(self) -> None:
        """Let the loop settle before sending what is pending: return once no other task can
        run, or after `SETTLE_WAIT`, or at once when what is pending is urgent (`_urgent`, now
        or as events come meanwhile) or the subscription stopped receiving."""
        if self.state != "active" or not self.pending or self._urgent():
            return
        with trio.move_on_after(SETTLE_WAIT) as scope:
            self._settling = scope
            try:
                await wait_until_idle()
            finally:
                self._settling = None


class EventHub:
    """The event stream of session `session_id`.

    Lifecycle: ``await nursery.start(hub.run)`` before the first `subscribe`; `close` publishes
    ``session_closed``, lets every subscriber drain up to it, and `run` returns once every
    delivery task has ended. Cancelling `run` ends delivery at once (a send already in progress
    finishes or fails on the connection's own terms) and closes the hub.
    """

    def __init__(
        self,
        session_id: str,
        *,
        buffer_size: int = DEFAULT_BUFFER_SIZE,
        subscriber_queue: int = DEFAULT_SUBSCRIBER_QUEUE,
        next_seq: int = 1,
    ) -> None:
        if buffer_size < 1:
            raise ValueError(f"buffer_size must be at least 1, not {buffer_size}")
        if subscriber_queue < 1:
            raise ValueError(f"subscriber_queue must be at least 1, not {subscriber_queue}")
        if next_seq < 1:
            raise ValueError(f"next_seq must be at least 1, not {next_seq}")
        self.session_id = session_id
        self._subscriber_queue = subscriber_queue
        self._buffer = ReplayBuffer(buffer_size)
        self._first_seq = next_seq
        self._next_seq = next_seq
        self._check_shapes = os.environ.get(CHECK_EVENTS_ENV, "") not in ("", "0")
        self._subs: dict[Hashable, _Subscription] = {}
        # The newest subscription per key whose delivery task has not ended, active or not:
        # the next subscription on that key waits for it, so a key's seqs only go up.
        self._tails: dict[Hashable, _Subscription] = {}
        self._nursery: trio.Nursery | None = None
        self._ran = False
        self._closed = False
        self._close_requested = trio.Event()
        self._holding: frozenset[str] = frozenset()  # what `hold` holds back, and the held
        self._held: list[Mapping[str, Any]] = []

    # -- state -----------------------------------------------------------------------------

    @property
    def latest_seq(self) -> int:
        """The seq of the last event published (``next_seq - 1`` before any)."""
        return self._next_seq - 1

    @property
    def oldest_seq(self) -> int:
        """The oldest seq still buffered; the next seq to come when nothing is buffered."""
        oldest = self._buffer.oldest_seq
        return self._next_seq if oldest is None else oldest

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def subscribers(self) -> frozenset[Hashable]:
        """Keys of the subscriptions receiving events now."""
        return frozenset(self._subs)

    # -- publishing ------------------------------------------------------------------------

    def publish(self, event_fields: Mapping[str, Any]) -> int:
        """Stamp, buffer and fan out one event; returns its seq. Synchronous; never blocks.

        `event_fields` holds ``type`` and the type's members, and ``turnId`` inside a turn
        (absent means null); the hub owns ``sessionId`` and ``seq`` and overrides any given.
        Raises ValueError for a missing ``type`` or the subscriber-only ``overflow`` type, and
        `trio.ClosedResourceError` once the hub is closed. A held event (`hold`) returns 0.
        """
        if self._closed:
            raise trio.ClosedResourceError(f"the event stream of {self.session_id} is closed")
        kind = event_fields.get("type")
        if not isinstance(kind, str) or not kind:
            raise ValueError(f"an event needs a non-empty string 'type', got {kind!r}")
        if kind == "overflow":
            raise ValueError("'overflow' is a notice to one subscriber, not a session event")
        if kind in self._holding:
            self._held.append(event_fields)
            return 0
        return self._publish(event_fields, force=False)

    def hold(self, kinds: frozenset[str]) -> None:
        """Hold back events of `kinds` until `release` publishes them (the daemon holds
        ``turn_finished`` until the session is free: a run started on reading it is accepted)."""
        self._holding = kinds

    def release(self) -> None:
        held, self._held, self._holding = self._held, [], frozenset()
        for event_fields in (event for event in held if not self._closed):
            self._publish(event_fields, force=False)

    def _publish(self, event_fields: Mapping[str, Any], *, force: bool) -> int:
        seq = self._next_seq
        self._next_seq += 1
        event = stamp(event_fields, self.session_id, seq)
        if self._check_shapes:
            check_shape(event)
        self._buffer.append(event)
        for sub in list(self._subs.values()):
            if not sub.offer(event, force=force):
                self._overflow(sub, seq)
        return seq

    def _overflow(self, sub: _Subscription, seq: int) -> None:
        del self._subs[sub.key]
        sub.overflow_seq = seq
        sub.stop("overflowed")
        log.info(
            "event subscriber overflowed and was unsubscribed",
            extra=fields(session_id=self.session_id, latest_seq=seq),
        )

    # -- subscribing -----------------------------------------------------------------------

    def subscribe(self, key: Hashable, send: Send, *, after_seq: int | None = None) -> int:
        """Deliver this session's events to `send`; returns the latest seq published so far.

        With `after_seq`, the buffered events after it are delivered first, in order, then live
        ones; raises `EventsLost` (nothing changed) when events after `after_seq` are no longer
        buffered or `after_seq` is beyond the latest seq (a seq of an earlier daemon process).
        Without it, delivery starts with the next event — or, when `key` is already
        subscribed, continues exactly where that subscription stands. A subscription already on
        `key` is replaced: the new one starts once the old one's send in progress has returned,
        and never resends what the old one sent. Raises ValueError for a negative `after_seq`,
        RuntimeError before `run` has started and `trio.ClosedResourceError` once the hub is
        closed.
        """
        if self._closed:
            raise trio.ClosedResourceError(f"the event stream of {self.session_id} is closed")
        if self._nursery is None:
            raise RuntimeError("EventHub.run has not started")
        tail = self._tails.get(key)
        current = self._subs.get(key)
        if after_seq is None:
            backlog = current.hand_over() if current is not None else []
        else:
            backlog = self._buffered_after(after_seq)
            if current is not None:
                current.stop("retired")
        sub = _Subscription(key, send, backlog, self._subscriber_queue, tail)
        self._subs[key] = sub
        self._tails[key] = sub
        self._nursery.start_soon(self._deliver, sub)
        return self.latest_seq

    def _buffered_after(self, after_seq: int) -> list[Event]:
        if after_seq < 0:
            raise ValueError(f"after_seq must be at least 0, not {after_seq}")
        oldest = self.oldest_seq
        if after_seq > self.latest_seq:
            raise EventsLost(self.session_id, oldest, latest_seq=self.latest_seq)
        # 0 is a client that saw nothing: every event is its due while none was dropped here.
        if after_seq < oldest - 1 and (after_seq > 0 or oldest > self._first_seq):
            raise EventsLost(self.session_id, oldest)
        return self._buffer.after(after_seq)

    def unsubscribe(self, key: Hashable) -> bool:
        """Stop delivering to `key` (a send in progress still finishes); True if it was
        subscribed. A later subscription on `key` replays what was sent before (PROTOCOL §6:
        "unsubscribe first to replay it"), also when this one's task has not ended yet."""
        tail = self._tails.get(key)
        if tail is not None:
            tail.unsubscribed = True
        sub = self._subs.pop(key, None)
        if sub is None:
            return False
        sub.stop("retired")
        return True

    # -- lifecycle -------------------------------------------------------------------------

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Host the delivery tasks; ready for `subscribe` once started. Returns after `close`
        once every delivery task has ended."""
        if self._ran:
            raise RuntimeError("an EventHub runs once")
        self._ran = True
        try:
            async with trio.open_nursery() as nursery:
                self._nursery = nursery
                task_status.started()
                await self._close_requested.wait()
        finally:
            self._nursery = None
            self._closed = True
            for sub in self._subs.values():
                sub.stop("retired")
            self._subs.clear()

    def close(self) -> None:
        """Publish ``session_closed`` (even to a subscriber whose queue is full), then let
        every subscriber drain up to it and end. Idempotent; later `publish` and `subscribe`
        are refused."""
        if self._closed:
            return
        self._publish(
            msgspec.to_builtins(SessionClosed(self.session_id, seq=0, turn_id=None)), force=True
        )
        self._closed = True
        for sub in self._subs.values():
            sub.stop("ending")
        self._subs.clear()
        self._close_requested.set()

    # -- delivery --------------------------------------------------------------------------

    async def _deliver(self, sub: _Subscription) -> None:
        sent = 0
        try:
            if sub.predecessor is not None:
                await sub.predecessor.finished.wait()
                if not sub.predecessor.unsubscribed:
                    sub.last_seq = sub.predecessor.last_seq
                sub.predecessor = None
            while True:
                event = sub.take()
                if event is None:
                    if sub.state != "active":
                        break
                    await sub.wait_for_more()
                    await sub.settle()
                    continue
                if event["seq"] <= sub.last_seq:
                    continue  # the previous subscription on this key already sent it
                sub.last_seq = event["seq"]
                await sub.send(event)
                sent += 1
                if sub.pending and sent % _SENDS_PER_ROUND == 0:
                    await trio.lowlevel.checkpoint()  # a long backlog: let others run too
            if sub.state == "overflowed":
                overflow = Overflow(session_id=self.session_id, latest_seq=sub.overflow_seq)
                await sub.send(msgspec.to_builtins(overflow))
        except Exception as exc:
            if self._subs.get(sub.key) is sub:
                del self._subs[sub.key]
            sub.stop("retired")
            log.log(
                logging.DEBUG if isinstance(exc, ConnectionError) else logging.WARNING,
                "event subscriber dropped: its send failed",
                exc_info=not isinstance(exc, ConnectionError),
                extra=fields(session_id=self.session_id, error=type(exc).__name__),
            )
        finally:
            sub.finished.set()
            if self._tails.get(sub.key) is sub:
                del self._tails[sub.key]
