"""Abort: what is kept, how open calls are closed, and commit failures that outrank it."""

from __future__ import annotations

from typing import Any

import pytest
import trio
import trio.testing

from protocol.shapes import Message, ToolCall
from robotad.agent import AbortSignal, EventBus, Observation, ToolBodyObserved, TurnAbortedError
from robotad.agent.gate import Admission
from robotad.agent.loop import TurnCallbacks
from robotad.agent.provider import ModelRequest
from robotad.agent.tool import Tool

from .loop_fakes import (
    EchoTool,
    FakeProvider,
    Journal,
    Recording,
    ScriptedGate,
    call_step,
    paired,
    scripted,
    start_history,
    toolbox,
    turn,
)


def _abort_after_deltas(abort: AbortSignal, count: int, seen: list[str]) -> TurnCallbacks:
    def on_text(delta: str) -> None:
        seen.append(delta)
        if len(seen) == count:
            abort.abort()

    return TurnCallbacks(on_text=on_text)


async def test_g191_abort_mid_stream_keeps_the_partial_reply_as_interrupted(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """G-191: aborting a streaming turn commits the text streamed so far, state interrupted."""
    abort = AbortSignal()
    seen: list[str] = []
    journal = Journal(start_history())
    provider = scripted({"text": "abcdef", "chunks": 3, "delayMs": 1000})

    with pytest.raises(TurnAbortedError) as caught:
        await turn(provider, journal, abort=abort, callbacks=_abort_after_deltas(abort, 2, seen))

    assert caught.value.open_calls == ()
    assert journal.roles() == ["system", "user", "assistant"]
    partial = journal.messages[-1]
    assert partial.content == "abcd"
    assert partial.state == "interrupted"
    assert partial.calls == []


async def test_abort_before_any_text_commits_no_reply() -> None:
    abort = AbortSignal()
    journal = Journal(start_history())

    async def on_request(request: ModelRequest) -> None:
        abort.abort()

    with pytest.raises(TurnAbortedError):
        await turn(
            scripted({"text": "never"}),
            journal,
            abort=abort,
            callbacks=TurnCallbacks(on_request=on_request),
        )

    assert journal.roles() == ["system", "user"]


async def test_an_abort_signalled_before_the_turn_stops_it_before_any_call() -> None:
    abort = AbortSignal()
    abort.abort()
    provider = Recording(scripted({"text": "never"}))
    journal = Journal(start_history())

    with pytest.raises(TurnAbortedError):
        await turn(provider, journal, abort=abort)

    assert provider.requests == []
    assert journal.roles() == ["system", "user"]


async def test_abort_during_tools_cancels_running_bodies_and_closes_every_call(
    autojump_clock: trio.testing.MockClock,
) -> None:
    echo = EchoTool()
    abort = AbortSignal()
    observed: list[Observation] = []
    bus = EventBus()
    bus.subscribe(observed.append)

    def abort_on_first_success(observation: Observation) -> None:
        if isinstance(observation, ToolBodyObserved) and observation.outcome == "ok":
            abort.abort()

    bus.subscribe(abort_on_first_success)
    journal = Journal(start_history())
    calls = [
        ("echo", {"value": "slow", "seconds": 60}),
        ("echo", {"value": "quick", "seconds": 1}),
    ] + [("echo", {"value": f"queued{n}", "seconds": 60}) for n in range(5)]

    with pytest.raises(TurnAbortedError) as caught:
        await turn(
            scripted(call_step(*calls), {"text": "never"}),
            journal,
            toolbox(echo),
            bus=bus,
            abort=abort,
        )

    assert caught.value.open_calls == ()
    assert paired(journal.messages)
    running = "interrupted: the turn was aborted while echo was running"
    not_run = "not run: the turn was aborted before echo started"
    # Five slots: slow, quick and queued0-2 started; quick finished; queued3-4 never started.
    assert [m.content for m in journal.tool_results()] == [
        running,
        "echo:quick",
        running,
        running,
        running,
        not_run,
        not_run,
    ]
    for closed in journal.tool_results():
        if closed.content != "echo:quick":
            assert closed.state == "interrupted"
            assert closed.metadata == {"ok": False, "aborted": True}
    assert sorted(echo.cancelled) == ["queued0", "queued1", "queued2", "slow"]
    outcomes = [o.outcome for o in observed if isinstance(o, ToolBodyObserved)]
    assert sorted(outcomes) == ["cancelled"] * 4 + ["ok"]
    assert journal.messages[-1].role == "tool"  # no provider call after the abort


async def test_abort_while_waiting_for_an_approver_leaves_that_call_not_run() -> None:
    abort = AbortSignal()
    asked = trio.Event()

    class LiveApprover(ScriptedGate):
        async def admit(self, call: ToolCall, tool: Tool) -> Admission:
            asked.set()
            await trio.sleep_forever()
            raise AssertionError("unreachable")

    journal = Journal(start_history())

    async def abort_when_asked() -> None:
        await asked.wait()
        abort.abort()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(abort_when_asked)
        with pytest.raises(TurnAbortedError):
            await turn(
                scripted(call_step(("echo", {"value": "x"}), ("echo", {"value": "y"}))),
                journal,
                toolbox(EchoTool()),
                gate=LiveApprover(),
                abort=abort,
            )

    assert paired(journal.messages)
    assert [m.content for m in journal.tool_results()] == [
        "not run: the turn was aborted before echo started"
    ] * 2


async def test_commit_failure_while_aborting_is_a_persistence_failure(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A journal write that fails during the abort's closing commit propagates as itself, and
    the unrecorded partial reply never enters history (cf. G-194)."""
    abort = AbortSignal()
    journal = Journal(start_history())
    journal.fail_when = lambda message: message.state == "interrupted"
    provider = scripted({"text": "abcdef", "chunks": 3, "delayMs": 1000})

    with pytest.raises(OSError, match="journal write failed"):
        await turn(provider, journal, abort=abort, callbacks=_abort_after_deltas(abort, 1, []))

    assert journal.roles() == ["system", "user"]


async def test_commit_failure_racing_an_abort_in_a_tool_round_still_propagates(
    autojump_clock: trio.testing.MockClock,
) -> None:
    abort = AbortSignal()
    journal = Journal(start_history())

    def fail(message: Message) -> bool:
        if message.content == "echo:quick":
            abort.abort()  # the abort lands while this very write fails
            return True
        return False

    journal.fail_when = fail
    calls: list[tuple[str, dict[str, Any]]] = [
        ("echo", {"value": "quick"}),
        ("echo", {"value": "slow", "seconds": 60}),
    ]

    with pytest.raises(OSError, match="journal write failed"):
        await turn(scripted(call_step(*calls)), journal, toolbox(EchoTool()), abort=abort)

    assert journal.roles() == ["system", "user", "assistant"]


async def test_commits_are_never_cut_off_by_the_abort(
    autojump_clock: trio.testing.MockClock,
) -> None:
    abort = AbortSignal()
    journal = Journal(start_history())

    async def slow_commit(message: Message) -> None:
        if message.role == "assistant" and message.calls:
            abort.abort()  # signalled while this write is in progress
            await trio.sleep(5)
        journal.messages.append(message)

    journal.commit = slow_commit  # type: ignore[method-assign]

    with pytest.raises(TurnAbortedError):
        await turn(
            scripted(call_step(("echo", {"value": "x"}))),
            journal,
            toolbox(EchoTool()),
            abort=abort,
        )

    assert journal.roles() == ["system", "user", "assistant", "tool"]
    assert journal.messages[-1].content == "not run: the turn was aborted before echo started"


async def test_cancellation_from_outside_is_not_an_abort(
    autojump_clock: trio.testing.MockClock,
) -> None:
    journal = Journal(start_history())

    with trio.move_on_after(1.5) as scope:
        await turn(scripted({"text": "abcdef", "chunks": 3, "delayMs": 1000}), journal)

    assert scope.cancelled_caught
    assert journal.roles() == ["system", "user"]


async def test_abort_signal_is_one_shot_and_covers_later_scopes() -> None:
    abort = AbortSignal()
    assert abort.abort() is True
    assert abort.abort() is False
    with abort.scope() as scope:
        await trio.lowlevel.checkpoint()
    assert scope.cancelled_caught
    assert abort.aborted


async def test_abort_between_committing_calls_and_running_them_closes_them() -> None:
    abort = AbortSignal()
    journal = Journal(start_history())

    async def on_reply(reply: object) -> None:
        abort.abort()
        await trio.lowlevel.checkpoint()

    with pytest.raises(TurnAbortedError):
        await turn(
            scripted(call_step(("echo", {"value": "a"}), ("echo", {"value": "b"}))),
            journal,
            toolbox(EchoTool()),
            abort=abort,
            callbacks=TurnCallbacks(on_reply=on_reply),
        )

    assert paired(journal.messages)
    assert [m.content for m in journal.tool_results()] == [
        "not run: the turn was aborted before echo started"
    ] * 2


async def test_a_provider_turning_the_abort_into_an_error_still_ends_in_the_abort() -> None:
    from robotad.agent.provider import ModelReply, ProviderError, StreamObserver

    abort = AbortSignal()

    class SwallowsCancellation(FakeProvider):
        name = "sloppy"

        async def complete(self, request: ModelRequest, observer: StreamObserver) -> ModelReply:
            observer.on_text("partial ")
            abort.abort()
            try:
                await trio.sleep_forever()
            except trio.Cancelled:
                raise ProviderError("stream closed") from None

    journal = Journal(start_history())
    with pytest.raises(TurnAbortedError):
        await turn(SwallowsCancellation(), journal, abort=abort)
    assert journal.messages[-1].content == "partial "
    assert journal.messages[-1].state == "interrupted"


async def test_a_settled_signal_takes_no_abort_and_only_cuts_what_runs_after() -> None:
    """Decision 42: once the work's outcome is settled, an abort is not taken (it answers
    false and `aborted` stays false) and only cancels the scopes still open or opened later
    (a closing hook); an abort taken before the settle wins it."""
    settled = AbortSignal()
    assert settled.settle() is True
    assert settled.abort() is False
    assert not settled.aborted
    with settled.scope() as scope:
        await trio.lowlevel.checkpoint()
    assert scope.cancelled_caught
    first = AbortSignal()
    assert first.abort() is True
    assert first.settle() is False
    assert first.aborted
    assert not first.settled
