"""The provider idle timeout: per call, refreshed by every streamed sign of life."""

from __future__ import annotations

import pytest
import trio
import trio.testing

from robotad.agent import (
    AbortSignal,
    CompletedTurn,
    EventBus,
    ModelCallFailed,
    Observation,
    TurnAbortedError,
)
from robotad.agent.provider import ModelReply, ModelRequest, StreamObserver

from .loop_fakes import (
    EchoTool,
    FakeProvider,
    Journal,
    call_step,
    scripted,
    start_history,
    toolbox,
    turn,
)


async def test_g039_a_silent_provider_call_fails_with_an_idle_timeout_reason(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """G-039: a call with no streamed delta for longer than the idle timeout fails the turn as
    a provider failure whose reason names the idle timeout."""
    journal = Journal(start_history())
    observed: list[Observation] = []
    bus = EventBus()
    bus.subscribe(observed.append)

    with pytest.raises(ModelCallFailed) as caught:
        await turn(
            scripted({"text": "too late", "delayMs": 5000}), journal, idle_timeout=1.0, bus=bus
        )

    assert caught.value.reason == "no data for 1 s (idle timeout): no reply began"
    assert caught.value.provider_name == "scripted"
    assert journal.roles() == ["system", "user"]
    assert [o.outcome for o in observed] == ["failed"]


class StopsMidStream(FakeProvider):
    """Streams one piece of text, then nothing."""

    name = "stops"

    async def complete(self, request: ModelRequest, observer: StreamObserver) -> ModelReply:
        observer.on_text("par")
        await trio.sleep_forever()
        raise AssertionError("unreachable")


async def test_g039_the_idle_reason_says_whether_the_reply_had_begun(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """G-039: a server that stops mid-reply is told apart from one that never began one."""
    journal = Journal(start_history())
    with pytest.raises(ModelCallFailed) as caught:
        await turn(StopsMidStream(), journal, idle_timeout=1.0)
    assert caught.value.reason == "no data for 1 s (idle timeout): the reply stopped mid-stream"
    assert journal.roles() == ["system", "user"]  # the partial "par" is not committed


async def test_g040_each_delta_restarts_the_idle_timer(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """G-040: a stream whose gaps are each shorter than the timeout completes, although the
    whole stream lasts ten times the timeout."""
    journal = Journal(start_history())
    started = trio.current_time()

    outcome = await turn(
        scripted({"text": "0123456789", "chunks": 10, "delayMs": 900}), journal, idle_timeout=1.0
    )

    assert outcome == CompletedTurn("0123456789", rounds=1)
    assert trio.current_time() - started >= 9.0  # virtual time: the stream outlived the timeout


async def test_g041_the_timeout_applies_to_each_call_separately(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """G-041: a turn of several rounds, each within the limit, completes however long the
    whole turn takes."""
    steps = [dict(call_step(("echo", {"value": str(n)})), delayMs=900) for n in range(6)]
    journal = Journal(start_history())
    started = trio.current_time()

    outcome = await turn(
        scripted(*steps, {"text": "done", "delayMs": 900}),
        journal,
        toolbox(EchoTool()),
        idle_timeout=1.0,
    )

    assert outcome == CompletedTurn("done", rounds=7)
    assert trio.current_time() - started >= 6.3


class _Heartbeat(FakeProvider):
    """Streams no text, only activity (e.g. tool-call argument chunks), every 0.5 s for 4 s."""

    name = "heartbeat"

    async def complete(self, request: ModelRequest, observer: StreamObserver) -> ModelReply:
        for _ in range(8):
            await trio.sleep(0.5)
            observer.on_activity()
        return ModelReply("ok", [])


async def test_other_streamed_activity_also_restarts_the_idle_timer(
    autojump_clock: trio.testing.MockClock,
) -> None:
    journal = Journal(start_history())
    outcome = await turn(_Heartbeat(), journal, idle_timeout=1.0)
    assert outcome == CompletedTurn("ok", rounds=1)


async def test_no_idle_timeout_waits_as_long_as_it_takes(
    autojump_clock: trio.testing.MockClock,
) -> None:
    journal = Journal(start_history())
    outcome = await turn(scripted({"text": "slow", "delayMs": 3_600_000}), journal)
    assert outcome == CompletedTurn("slow", rounds=1)


async def test_an_abort_arriving_with_the_idle_deadline_is_an_abort(
    autojump_clock: trio.testing.MockClock,
) -> None:
    abort = AbortSignal()

    class AbortsWhenTimedOut(FakeProvider):
        name = "racer"

        async def complete(self, request: ModelRequest, observer: StreamObserver) -> ModelReply:
            try:
                await trio.sleep(5)
            except trio.Cancelled:
                abort.abort()  # the deadline and the abort land together
                raise
            raise AssertionError("the idle deadline should have fired")

    with pytest.raises(TurnAbortedError):
        await turn(AbortsWhenTimedOut(), Journal(start_history()), idle_timeout=1.0, abort=abort)


class _Endless(FakeProvider):
    """Streams text (or a tool call's arguments, or thinking: what a provider reports as
    activity with the characters it kept) and never finishes (a server gone wrong); counts
    what it sent."""

    name = "endless"

    def __init__(self, streams: str) -> None:
        self.streams = streams
        self.sent = 0

    async def complete(self, request: ModelRequest, observer: StreamObserver) -> ModelReply:
        while True:
            if self.streams == "text":
                observer.on_text("x" * 65_536)
            else:
                observer.on_activity(65_536)
            self.sent += 65_536
            await trio.lowlevel.checkpoint()


@pytest.mark.parametrize("streams", ["text", "tool-call arguments"])
async def test_a_reply_that_never_ends_is_stopped_at_its_bound(streams: str) -> None:
    """Lively is not enough: a stream past `MAX_REPLY_CHARS` — text, or what is not text
    (a tool call's arguments, thinking) — fails the call (a named provider failure) instead of
    growing the reply, the record and the log without end; the history claims no reply."""
    from robotad.agent.stream_tap import MAX_REPLY_CHARS

    journal = Journal(start_history())
    provider = _Endless(streams)
    with trio.fail_after(60), pytest.raises(ModelCallFailed) as caught:
        await turn(provider, journal, idle_timeout=1.0)
    assert caught.value.reason.startswith("the reply passed 2 Mi characters without ending")
    assert MAX_REPLY_CHARS < provider.sent + 65_536 <= MAX_REPLY_CHARS + 2 * 65_536
    assert journal.roles() == ["system", "user"]
