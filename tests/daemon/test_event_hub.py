"""The per-session event stream (PROTOCOL §5 session/subscribe, §6): seq stamping, replay after
``afterSeq``, fan-out, overflow of a slow subscriber, dropping a dead one, and close.

Every test runs on the autojump clock and waits for deliveries under a `fail_after`, so a
delivery that never comes fails at once instead of hanging; nothing asserts on time.
"""

from __future__ import annotations

import random
from collections.abc import AsyncIterator
from typing import Any

import msgspec
import pytest
import trio
import trio.testing

from protocol.errors import EventsLost
from protocol.events import (
    EVENT_METHOD,
    Overflow,
    SessionClosed,
    SessionEvent,
    TextDelta,
    TurnStarted,
)
from protocol.peer import ConnectionLost, JsonRpcPeer
from robotad.daemon import events as events_module
from robotad.daemon.events import SETTLE_WAIT, Event, EventHub, first_seq_after_restart

SID = "s1"


@pytest.fixture(autouse=True)
def _any_event_shapes(monkeypatch: pytest.MonkeyPatch) -> None:
    """The hub is tested as a transport of any members; the suite's shape check is for
    events a Session publishes (tests/conftest.py)."""
    monkeypatch.delenv("ROBOTA_CHECK_EVENTS", raising=False)


class Recorder:
    """A subscriber that records what it is sent and lets the test wait for a count of events.

    While `gate` is set to an unset trio.Event, every send blocks on it (a stalled connection).
    """

    def __init__(self) -> None:
        self.events: list[Event] = []
        self.gate: trio.Event | None = None
        self.in_flight = 0
        #: The most sends ever in progress at once: a destination gets one event at a time.
        self.max_in_flight = 0
        self._changed = trio.Event()

    async def send(self, event: Event) -> None:
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            if self.gate is not None:
                await self.gate.wait()
            self.events.append(event)
            self._changed.set()
        finally:
            self.in_flight -= 1

    def open_gate(self) -> None:
        """Let the blocked send, and every later one, through."""
        assert self.gate is not None
        self.gate.set()

    async def wait_for(self, count: int) -> list[Event]:
        """Wait until `count` events arrived; on the autojump clock a delivery that never
        comes fails at once."""
        with trio.fail_after(60):
            while len(self.events) < count:
                self._changed = trio.Event()
                await self._changed.wait()
        return self.events

    @property
    def seqs(self) -> list[int]:
        return [e["seq"] for e in self.events if e["type"] != "overflow"]


@pytest.fixture
async def hub() -> AsyncIterator[EventHub]:
    """A running hub (buffer 50, queue 8). pytest-trio takes the clock from the test's own
    arguments only, so every test using this also asks for ``autojump_clock``."""
    async with trio.open_nursery() as nursery:
        the_hub = EventHub(SID, buffer_size=50, subscriber_queue=8)
        await nursery.start(the_hub.run)
        yield the_hub
        nursery.cancel_scope.cancel()


async def settled() -> None:
    """Return once every task is blocked and every delivery woken meanwhile has sent. A
    delivery task woken by events first waits for the loop to go idle (`_Subscription.settle`):
    the first idle moment wakes it and this test alike, the second comes once it has sent."""
    await trio.testing.wait_all_tasks_blocked()
    await trio.testing.wait_all_tasks_blocked()


def delta(text: str = "x", turn_id: str = "t1") -> dict[str, Any]:
    return {"type": "text_delta", "turnId": turn_id, "text": text}


def publish_deltas(hub: EventHub, count: int) -> None:
    """Publish `count` text deltas at once (no checkpoint between them)."""
    for _ in range(count):
        hub.publish(delta())


def stalled_subscriber(hub: EventHub, key: str = "c1") -> Recorder:
    """A subscriber of `hub` under `key` whose every send blocks until its gate is set."""
    recorder = Recorder()
    recorder.gate = trio.Event()
    hub.subscribe(key, recorder.send)
    return recorder


async def release_one_at_a_time(recorder: Recorder, count: int) -> None:
    """Open `recorder`'s gate and wait until `count` events arrived and every delivery
    settled: it was never sent two events at once."""
    recorder.open_gate()
    await recorder.wait_for(count)
    await settled()
    assert recorder.max_in_flight == 1


def as_wire(event: Event) -> Any:
    """Decode an event through the protocol's Structs: proves it is a valid session/event."""
    return msgspec.json.decode(msgspec.json.encode(event), type=SessionEvent)


# -- letting the loop settle ----------------------------------------------------------------


class Producer:
    """A task that publishes events between steps of its own work (checkpoints, as a turn's
    steps are) and records how many events the subscriber had when it stopped working."""

    def __init__(self, hub: EventHub, recorder: Recorder) -> None:
        self.hub = hub
        self.recorder = recorder
        self.delivered_while_busy = -1

    async def run(self, kinds: list[str], *, busy_steps: int = 20) -> None:
        for kind in kinds:
            self.hub.publish(
                {"type": kind, "turnId": "t1"} | ({"text": "x"} if kind == "text_delta" else {})
            )
            await trio.lowlevel.checkpoint()
        for _ in range(busy_steps):
            await trio.lowlevel.checkpoint()
        self.delivered_while_busy = len(self.recorder.events)


async def test_events_wait_until_their_producer_waits_then_go_out_together(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Decision 38: a woken delivery lets the loop settle, so a turn's events go out while
    the turn waits (for its save), not between its steps."""
    recorder = Recorder()
    async with trio.open_nursery() as nursery:
        hub = EventHub(SID, subscriber_queue=64)
        await nursery.start(hub.run)
        hub.subscribe("c1", recorder.send)
        await settled()  # the delivery task started and waits for events
        producer = Producer(hub, recorder)
        await producer.run(["turn_started", "text_delta", "context_updated"])
        assert producer.delivered_while_busy == 0
        events = await recorder.wait_for(3)
        assert [e["seq"] for e in events] == [1, 2, 3]
        hub.close()


async def test_the_end_of_a_turn_goes_at_once_with_what_waited_before_it(
    hub: EventHub, autojump_clock: trio.testing.MockClock
) -> None:
    """``turn_finished`` does not wait for the loop to settle (a client waits for it beside
    the reply), and it takes the events queued before it along, in order."""
    recorder = Recorder()
    hub.subscribe("c1", recorder.send)
    await settled()  # the delivery task started and waits for events
    producer = Producer(hub, recorder)
    await producer.run(["text_delta", "text_delta", "turn_finished"])
    assert producer.delivered_while_busy == 3
    assert recorder.seqs == [1, 2, 3]


async def test_a_quarter_full_queue_goes_without_waiting_for_the_loop(
    hub: EventHub, autojump_clock: trio.testing.MockClock
) -> None:
    """A producer that keeps the loop busy must not overflow a subscriber that waits for the
    loop to settle: with a quarter of the queue (2 of 8) waiting, they go at once; one alone
    waits."""
    recorder = Recorder()
    hub.subscribe("c1", recorder.send)
    await settled()
    producer = Producer(hub, recorder)
    await producer.run(["text_delta"])
    assert producer.delivered_while_busy == 0
    await recorder.wait_for(1)
    await settled()
    await producer.run(["text_delta"] * 2)
    assert producer.delivered_while_busy == 3
    assert hub.subscribers == {"c1"}


async def test_a_loop_that_never_settles_still_delivers_within_the_bound() -> None:
    """On the real clock: a producer that publishes once and then keeps the loop busy for
    twenty times `SETTLE_WAIT` has its event delivered while it is still busy."""
    hub = EventHub(SID)
    recorder = Recorder()
    delivered_at: list[float] = []
    busy_until = 0.0
    async with trio.open_nursery() as nursery:
        await nursery.start(hub.run)
        hub.subscribe("c1", recorder.send)
        await trio.testing.wait_all_tasks_blocked()  # the delivery task waits for events
        hub.publish(delta())
        busy_until = trio.current_time() + 20 * SETTLE_WAIT
        while trio.current_time() < busy_until:
            if recorder.events and not delivered_at:
                delivered_at.append(trio.current_time())
            await trio.lowlevel.checkpoint()
        hub.close()
    assert delivered_at
    assert delivered_at[0] < busy_until


def test_the_idle_wait_is_trios_public_one() -> None:
    """robotad imports trio's idle wait from where it lives (`trio.testing` imports pytest);
    it must stay the function trio documents, or an upgrade that moved it fails here."""
    assert events_module.wait_until_idle is trio.testing.wait_all_tasks_blocked


# -- stamping -------------------------------------------------------------------------------


async def test_publish_stamps_session_id_seq_and_a_null_turn_id(
    hub: EventHub, autojump_clock: trio.testing.MockClock
) -> None:
    first = hub.publish({"type": "turn_started", "turnId": "t1", "prompt": "hi"})
    second = hub.publish({"type": "session_closed", "sessionId": "forged", "seq": 999})
    recorder = Recorder()
    hub.subscribe("c1", recorder.send, after_seq=0)
    events = await recorder.wait_for(2)
    assert (first, second) == (1, 2)
    assert as_wire(events[0]) == TurnStarted(SID, 1, "t1", "hi")
    assert as_wire(events[1]) == SessionClosed(SID, 2, None)
    assert hub.latest_seq == 2


async def test_publish_refuses_an_event_without_a_type_or_of_the_overflow_type(
    hub: EventHub, autojump_clock: trio.testing.MockClock
) -> None:
    with pytest.raises(ValueError, match="type"):
        hub.publish({"text": "x"})
    with pytest.raises(ValueError, match="overflow"):
        hub.publish({"type": "overflow", "latestSeq": 1})
    assert hub.latest_seq == 0


async def test_seq_is_strictly_increasing_under_concurrent_publishers(
    hub: EventHub, autojump_clock: trio.testing.MockClock
) -> None:
    recorder = Recorder()
    hub.subscribe("c1", recorder.send)
    returned: list[int] = []

    async def publisher(name: str) -> None:
        for i in range(10):
            returned.append(hub.publish(delta(f"{name}{i}", turn_id=name)))
            await trio.lowlevel.checkpoint()

    async with trio.open_nursery() as nursery:
        # Three publishers: the subscriber runs once per scheduling batch, so at most two
        # batches' worth (six events) wait in its queue of eight.
        for n in range(3):
            nursery.start_soon(publisher, f"t{n}")
    assert returned == list(range(1, 31))
    await recorder.wait_for(30)
    assert recorder.seqs == list(range(1, 31))


async def test_a_reloaded_session_continues_from_the_seq_it_is_given(
    autojump_clock: trio.testing.MockClock,
) -> None:
    reloaded = EventHub(SID, next_seq=42)
    assert (reloaded.latest_seq, reloaded.oldest_seq) == (41, 42)
    recorder = Recorder()
    async with trio.open_nursery() as nursery:
        await nursery.start(reloaded.run)
        with pytest.raises(EventsLost) as lost:
            reloaded.subscribe("c1", recorder.send, after_seq=40)
        assert lost.value.data == {"sessionId": SID, "oldestSeq": 42}
        assert reloaded.subscribe("c1", recorder.send, after_seq=41) == 41
        assert reloaded.publish(delta()) == 42
        await recorder.wait_for(1)
        reloaded.close()
    assert recorder.seqs == [42, 43]


async def test_a_session_an_earlier_process_served_starts_above_every_seq_it_gave() -> None:
    """After a restart a client's ``afterSeq`` from the earlier process (however high) is older
    than the buffer: -32012, never a silent skip of this process's first events. A client
    that saw nothing (``afterSeq`` 0) still gets every buffered event."""
    reloaded = EventHub(SID, next_seq=first_seq_after_restart())
    assert reloaded.oldest_seq > 10**15  # microseconds since the epoch
    early = Recorder()
    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            await nursery.start(reloaded.run)
            first = reloaded.publish(delta())
            reloaded.publish(delta())
            with pytest.raises(EventsLost) as lost:
                reloaded.subscribe("stale", Recorder().send, after_seq=30)
            assert lost.value.data == {"sessionId": SID, "oldestSeq": first}
            assert reloaded.subscribe("c1", early.send, after_seq=0) == first + 1
            await early.wait_for(2)
            assert early.seqs == [first, first + 1]
            assert first_seq_after_restart() > first + 1  # a later process starts above
            reloaded.close()


async def test_after_seq_zero_is_refused_once_an_event_was_dropped() -> None:
    """0 means "everything": once the buffer dropped an event, that is no longer on offer."""
    hub = EventHub(SID, buffer_size=1, next_seq=first_seq_after_restart())
    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            await nursery.start(hub.run)
            hub.publish(delta())
            kept = hub.publish(delta())
            with pytest.raises(EventsLost) as lost:
                hub.subscribe("c1", Recorder().send, after_seq=0)
            assert lost.value.data == {"sessionId": SID, "oldestSeq": kept}
            hub.close()


# -- fan-out and replay ---------------------------------------------------------------------


async def test_two_subscribers_each_see_every_event_in_order(
    hub: EventHub, autojump_clock: trio.testing.MockClock
) -> None:
    first, second = Recorder(), Recorder()
    assert hub.subscribe("c1", first.send) == 0
    assert hub.subscribe("c2", second.send) == 0
    for i in range(20):
        hub.publish(delta(str(i)))
        if i % 3 == 0:
            await trio.lowlevel.checkpoint()
    await first.wait_for(20)
    await second.wait_for(20)
    assert first.seqs == second.seqs == list(range(1, 21))
    assert [e["text"] for e in first.events] == [str(i) for i in range(20)]
    assert all(isinstance(as_wire(e), TextDelta) for e in first.events)


async def test_reconnect_with_after_seq_sees_exactly_the_missed_events(
    hub: EventHub, autojump_clock: trio.testing.MockClock
) -> None:
    before = Recorder()
    hub.subscribe("conn-1", before.send)
    publish_deltas(hub, 3)
    await before.wait_for(3)
    assert hub.unsubscribe("conn-1") is True  # the connection went away
    publish_deltas(hub, 4)

    after = Recorder()
    assert hub.subscribe("conn-2", after.send, after_seq=before.seqs[-1]) == 7
    hub.publish(delta())  # a live one after the replayed ones
    await after.wait_for(5)
    assert after.seqs == [4, 5, 6, 7, 8]
    await settled()
    assert before.seqs == [1, 2, 3]


async def test_after_seq_older_than_the_buffer_is_events_lost_with_the_oldest_seq(
    hub: EventHub, autojump_clock: trio.testing.MockClock
) -> None:
    publish_deltas(hub, 60)  # the buffer keeps 50
    assert hub.oldest_seq == 11
    recorder = Recorder()
    with pytest.raises(EventsLost) as lost:
        hub.subscribe("c1", recorder.send, after_seq=9)
    assert lost.value.code == -32012
    assert lost.value.data == {"sessionId": SID, "oldestSeq": 11}
    assert hub.subscribers == frozenset()

    hub.subscribe("c1", recorder.send, after_seq=10)  # oldest - 1: nothing is missing
    await recorder.wait_for(50)
    assert recorder.seqs == list(range(11, 61))


async def test_after_seq_beyond_the_latest_seq_is_events_lost(
    hub: EventHub, autojump_clock: trio.testing.MockClock
) -> None:
    """A seq from an earlier daemon process cannot be continued from."""
    hub.publish(delta())
    with pytest.raises(EventsLost) as lost:
        hub.subscribe("c1", Recorder().send, after_seq=5)
    assert lost.value.data == {"sessionId": SID, "oldestSeq": 1}


async def test_a_replayed_backlog_larger_than_the_queue_does_not_overflow(
    hub: EventHub, autojump_clock: trio.testing.MockClock
) -> None:
    publish_deltas(hub, 30)  # more than the subscriber queue of 8
    recorder = Recorder()
    hub.subscribe("c1", recorder.send, after_seq=0)
    publish_deltas(hub, 8)  # and a full queue of live ones on top
    await recorder.wait_for(38)
    assert recorder.seqs == list(range(1, 39))
    assert hub.subscribers == {"c1"}

    # Once the backlog is out, the live queue holds exactly eight again.
    recorder.gate = trio.Event()
    hub.publish(delta())
    await settled()  # 39 in flight
    publish_deltas(hub, 8)
    assert hub.subscribers == {"c1"}
    hub.publish(delta())
    assert hub.subscribers == frozenset()


# -- slow and dead subscribers --------------------------------------------------------------


async def test_a_stalled_subscriber_gets_one_overflow_and_never_slows_another(
    hub: EventHub, autojump_clock: trio.testing.MockClock
) -> None:
    stalled, healthy = Recorder(), Recorder()
    stalled.gate = trio.Event()  # its send never returns until the test says so
    hub.subscribe("stalled", stalled.send)
    hub.subscribe("healthy", healthy.send)
    hub.publish(delta())
    await settled()  # event 1 is stuck in the stalled send

    # publish is synchronous and returns at once while the stalled send stays blocked; the
    # healthy subscriber gets to run between small batches.
    seqs: list[int] = []
    for i in range(40):
        seqs.append(hub.publish(delta()))
        if i % 4 == 3:
            await settled()
    assert seqs == list(range(2, 42))
    assert hub.subscribers == {"healthy"}
    await healthy.wait_for(41)
    assert healthy.seqs == list(range(1, 42))

    stalled.gate.set()
    await stalled.wait_for(10)  # event 1, the 8 it had queued, then the notice
    hub.publish(delta())
    await settled()
    assert stalled.seqs == list(range(1, 10))
    notice = stalled.events[-1]
    assert len(stalled.events) == 10
    assert notice == {"type": "overflow", "sessionId": SID, "latestSeq": 10}
    assert as_wire(notice) == Overflow(SID, 10)
    await healthy.wait_for(42)


async def test_an_overflowed_subscriber_resubscribes_and_misses_nothing(
    hub: EventHub, autojump_clock: trio.testing.MockClock
) -> None:
    slow = stalled_subscriber(hub)
    publish_deltas(hub, 20)
    slow.open_gate()
    events = await slow.wait_for(9)  # the 8 it had queued, then the notice
    assert events[-1]["type"] == "overflow"
    slow.gate = None
    hub.subscribe("c1", slow.send, after_seq=slow.seqs[-1])
    await slow.wait_for(9 + 12)
    assert slow.seqs == list(range(1, 21))


async def test_a_subscriber_whose_send_raises_is_dropped(
    hub: EventHub, autojump_clock: trio.testing.MockClock
) -> None:
    healthy = Recorder()
    calls: list[int] = []

    async def broken(event: Event) -> None:
        calls.append(event["seq"])
        if len(calls) == 2:
            raise ConnectionLost("connection closed by the remote")

    async def buggy(event: Event) -> None:
        raise TypeError("not serialisable")

    hub.subscribe("broken", broken)
    hub.subscribe("buggy", buggy)
    hub.subscribe("healthy", healthy.send)
    publish_deltas(hub, 5)
    await healthy.wait_for(5)
    await settled()
    assert calls == [1, 2]
    assert hub.subscribers == {"healthy"}
    hub.publish(delta())
    await healthy.wait_for(6)
    assert calls == [1, 2]


# -- replacing a subscription ---------------------------------------------------------------


async def test_resubscribing_a_key_without_after_seq_takes_over_its_queue(
    hub: EventHub, autojump_clock: trio.testing.MockClock
) -> None:
    recorder = stalled_subscriber(hub)
    hub.publish(delta())
    await settled()  # event 1 in flight on the old subscription
    publish_deltas(hub, 4)
    assert hub.subscribe("c1", recorder.send) == 5
    hub.publish(delta())
    await release_one_at_a_time(recorder, 6)
    assert recorder.seqs == [1, 2, 3, 4, 5, 6]


async def test_resubscribing_a_key_with_an_older_after_seq_never_repeats_or_reorders(
    hub: EventHub, autojump_clock: trio.testing.MockClock
) -> None:
    recorder = stalled_subscriber(hub)
    publish_deltas(hub, 5)
    await settled()  # event 1 in flight
    hub.subscribe("c1", recorder.send, after_seq=0)
    await release_one_at_a_time(recorder, 5)
    assert recorder.seqs == [1, 2, 3, 4, 5]


async def overflowed(hub: EventHub) -> Recorder:
    """A stalled subscriber "c1" with event 1 in flight, 2..9 queued and 10 overflowed."""
    recorder = stalled_subscriber(hub)
    hub.publish(delta())
    await settled()  # 1 in flight
    publish_deltas(hub, 9)  # 2..9 queued, 10 overflows
    return recorder


async def test_resubscribing_while_an_overflowed_subscription_drains_repeats_nothing(
    hub: EventHub, autojump_clock: trio.testing.MockClock
) -> None:
    recorder = await overflowed(hub)
    assert hub.subscribers == frozenset()
    hub.subscribe("c1", recorder.send, after_seq=0)  # before the client saw anything
    hub.publish(delta())
    await release_one_at_a_time(recorder, 12)  # 1..9, the notice, 10, 11
    assert recorder.seqs == list(range(1, 12))
    assert [e["type"] for e in recorder.events].count("overflow") == 1


async def test_unsubscribing_first_replays_what_was_sent_even_in_the_same_step(
    hub: EventHub, autojump_clock: trio.testing.MockClock
) -> None:
    """PROTOCOL §6: "unsubscribe first to replay it". A batch [unsubscribe, subscribe
    {afterSeq: 0}] runs both in the reader with no checkpoint between, so the old delivery
    task has not ended yet; the new subscription still replays, after it."""
    recorder = Recorder()
    hub.subscribe("c1", recorder.send)
    publish_deltas(hub, 3)
    await recorder.wait_for(3)
    await settled()
    assert hub.unsubscribe("c1") is True
    hub.subscribe("c1", recorder.send, after_seq=0)
    hub.publish(delta())
    await recorder.wait_for(7)
    assert recorder.seqs == [1, 2, 3, 1, 2, 3, 4]


async def test_unsubscribing_while_an_overflowed_subscription_drains_replays_after_it(
    hub: EventHub, autojump_clock: trio.testing.MockClock
) -> None:
    recorder = await overflowed(hub)
    assert hub.unsubscribe("c1") is False  # already unsubscribed by the overflow
    hub.subscribe("c1", recorder.send, after_seq=7)
    await release_one_at_a_time(recorder, 13)  # 1..9, the notice, then 8..10 again
    assert recorder.seqs == [*range(1, 10), 8, 9, 10]
    assert [e["type"] for e in recorder.events].index("overflow") == 9


@pytest.mark.parametrize("seed", range(40))
async def test_random_interleavings_keep_each_key_gap_free_and_increasing(
    autojump_clock: trio.testing.MockClock, seed: int
) -> None:
    """Whatever mix of publishing, delivery progress and resubscribing (with or without
    afterSeq = the last seq received) happens, a key sees every seq exactly once, in order."""
    rng = random.Random(seed)
    recorder = Recorder()
    hub = EventHub(SID, buffer_size=1000, subscriber_queue=4)
    async with trio.open_nursery() as nursery:
        await nursery.start(hub.run)
        hub.subscribe("c1", recorder.send)
        await _interleave(hub, recorder, rng)
        hub.close()
    assert recorder.seqs == list(range(1, hub.latest_seq + 1))


async def _interleave(hub: EventHub, recorder: Recorder, rng: random.Random) -> None:
    for _ in range(60):
        action = rng.random()
        if action < 0.6:
            hub.publish(delta())
        elif action < 0.8:
            await trio.lowlevel.checkpoint()
        elif action < 0.9:
            hub.subscribe("c1", recorder.send)
        else:
            last = recorder.seqs[-1] if recorder.seqs else 0
            hub.subscribe("c1", recorder.send, after_seq=last)
        if hub.subscribers == frozenset():  # overflowed: resubscribe as a client would
            await settled()
            last = recorder.seqs[-1] if recorder.seqs else 0
            hub.subscribe("c1", recorder.send, after_seq=last)


# -- lifecycle ------------------------------------------------------------------------------


async def test_close_delivers_session_closed_and_ends_delivery(
    autojump_clock: trio.testing.MockClock,
) -> None:
    hub = EventHub(SID, subscriber_queue=2)
    first, full = Recorder(), Recorder()
    full.gate = trio.Event()
    with trio.fail_after(60):
        async with trio.open_nursery() as nursery:
            await nursery.start(hub.run)
            hub.subscribe("c1", first.send)
            hub.subscribe("c2", full.send)
            hub.publish(delta())
            await settled()
            hub.publish(delta())
            hub.publish(delta())  # c2's queue is now full
            hub.close()
            hub.close()  # idempotent
            full.gate.set()
        # the nursery exits: run returned once both subscribers drained
    for recorder in (first, full):
        assert recorder.seqs == [1, 2, 3, 4]
        assert as_wire(recorder.events[-1]) == SessionClosed(SID, 4, None)
    assert hub.closed
    with pytest.raises(trio.ClosedResourceError):
        hub.publish(delta())
    with pytest.raises(trio.ClosedResourceError):
        hub.subscribe("c3", first.send)


async def test_subscribe_before_run_is_refused(autojump_clock: trio.testing.MockClock) -> None:
    with pytest.raises(RuntimeError, match="run"):
        EventHub(SID).subscribe("c1", Recorder().send)


async def test_unsubscribe_stops_delivery_and_reports_whether_it_was_subscribed(
    hub: EventHub, autojump_clock: trio.testing.MockClock
) -> None:
    recorder = stalled_subscriber(hub)
    publish_deltas(hub, 3)
    await settled()  # 1 in flight, 2 and 3 queued
    assert hub.unsubscribe("c1") is True
    assert hub.unsubscribe("c1") is False
    hub.publish(delta())
    recorder.open_gate()
    await settled()
    assert recorder.seqs == [1]  # the send in progress finished; nothing after it


async def test_events_reach_a_client_peer_and_a_closed_connection_is_dropped(
    hub: EventHub, autojump_clock: trio.testing.MockClock
) -> None:
    """End to end over a JSON-RPC connection: the subscriber's send is the server peer's
    ``notify("session/event", ...)``; the client decodes every notification as a SessionEvent."""
    received: list[Any] = []
    arrived = trio.Event()

    def on_notification(method: str, params: msgspec.Raw) -> None:
        assert method == EVENT_METHOD
        received.append(msgspec.json.decode(params, type=SessionEvent))
        arrived.set()

    client_stream, server_stream = trio.testing.memory_stream_pair()
    server = JsonRpcPeer(server_stream)
    client = JsonRpcPeer(client_stream, on_notification=on_notification)
    async with trio.open_nursery() as nursery:
        await nursery.start(server.run)
        await nursery.start(client.run)

        async def send(event: Event) -> None:
            await server.notify(EVENT_METHOD, event)

        hub.subscribe(server, send)
        hub.publish({"type": "turn_started", "turnId": "t1", "prompt": "hi"})
        hub.publish(delta("hello"))
        with trio.fail_after(60):
            while len(received) < 2:
                arrived = trio.Event()
                await arrived.wait()
        assert received == [TurnStarted(SID, 1, "t1", "hi"), TextDelta(SID, 2, "t1", "hello")]

        await client.aclose()
        hub.publish(delta())
        await settled()
        assert hub.subscribers == frozenset()
        nursery.cancel_scope.cancel()


async def test_held_events_are_published_on_release_after_the_others(
    hub: EventHub, autojump_clock: trio.testing.MockClock
) -> None:
    """The daemon's turn_finished rule: an event of a held type waits for `release`, then is
    stamped after everything published meanwhile; other types pass at once."""
    recorder = Recorder()
    hub.subscribe("c1", recorder.send)
    hub.hold(frozenset({"session_closed"}))
    assert hub.publish({"type": "session_closed"}) == 0
    hub.publish(delta("a"))
    assert hub.latest_seq == 1
    hub.release()
    hub.publish({"type": "session_closed"})
    events = await recorder.wait_for(3)
    assert [(e["seq"], e["type"]) for e in events] == [
        (1, "text_delta"),
        (2, "session_closed"),
        (3, "session_closed"),
    ]


async def test_a_long_backlog_lets_other_tasks_run_every_64_sends(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A send the socket takes at once passes no checkpoint (`JsonRpcPeer.notify` with
    ``checkpoint=False``), so a replayed backlog would hold the event loop to the end; the
    delivery loop lets other tasks run after every 64 sends while more wait."""
    hub = EventHub(SID, buffer_size=500, subscriber_queue=8)
    recorder = Recorder()
    seen: list[int] = []
    async with trio.open_nursery() as nursery:
        await nursery.start(hub.run)
        publish_deltas(hub, 200)
        hub.subscribe("c1", recorder.send, after_seq=0)

        async def watcher() -> None:
            while len(recorder.events) < 200:
                seen.append(len(recorder.events))
                await trio.lowlevel.checkpoint()

        nursery.start_soon(watcher)
        await recorder.wait_for(200)
        hub.close()
    partial = {n for n in seen if 0 < n < 200}  # trio's batch order may hide some of them
    assert partial
    assert all(n % 64 == 0 for n in partial), partial
