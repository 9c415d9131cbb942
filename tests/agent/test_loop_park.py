"""Parking a call for a person, and continuing the open round in a later run."""

from __future__ import annotations

import pytest
import trio
import trio.testing

from protocol.shapes import Message, ToolCall
from robotad.agent import (
    AbortSignal,
    AdmitAll,
    CompletedTurn,
    ParkedCall,
    ParkedTurn,
    TurnAbortedError,
    open_calls,
)
from robotad.agent.gate import Admission, Admit, Park
from robotad.agent.tool import Tool

from .loop_fakes import (
    EchoTool,
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


def _park_value(value: str) -> ScriptedGate:
    def decide(call: ToolCall) -> Admission:
        if call.arguments.get("value") == value:
            return Park("needs approval")
        return Admit(call.arguments)

    return ScriptedGate(decide)


async def test_park_settles_running_calls_then_a_continuation_finishes_the_turn(
    autojump_clock: trio.testing.MockClock,
) -> None:
    echo = EchoTool()
    tools = toolbox(echo)
    provider = Recording(
        scripted(
            call_step(
                ("echo", {"value": "running", "seconds": 30}),
                ("echo", {"value": "risky"}),
                ("echo", {"value": "after"}),
            ),
            {"text": "all three done"},
        )
    )
    journal = Journal(start_history())

    outcome = await turn(provider, journal, tools, gate=_park_value("risky"))

    assert isinstance(outcome, ParkedTurn)
    assistant = journal.messages[2]
    _running, risky, after = assistant.calls
    assert outcome.parked == (ParkedCall(risky, "needs approval"),)
    assert outcome.unstarted == (after,)
    assert outcome.rounds == 1
    # The call already running when the park came settled and was committed; the round is open.
    assert journal.roles() == ["system", "user", "assistant", "tool"]
    assert journal.tool_results()[0].content == "echo:running"
    assert echo.finished == ["running"]
    assert open_calls(journal.messages) == [risky, after]

    # Later (a resume): the same history, a gate that now admits; no new user message.
    continued = await turn(provider, journal, tools, gate=AdmitAll())

    assert continued == CompletedTurn("all three done", rounds=1)
    assert [m.content for m in journal.tool_results()] == [
        "echo:running",
        "echo:risky",
        "echo:after",
    ]
    assert journal.roles() == ["system", "user", "assistant", "tool", "tool", "tool", "assistant"]
    assert paired(journal.messages)
    assert len(provider.requests) == 2
    assert provider.requests[1].messages[-1].content == "echo:after"


async def test_a_continuation_may_park_again() -> None:
    tools = toolbox(EchoTool())
    provider = scripted(call_step(("echo", {"value": "a"}), ("echo", {"value": "b"})))
    journal = Journal(start_history())

    first = await turn(provider, journal, tools, gate=_park_value("a"))
    second = await turn(provider, journal, tools, gate=_park_value("b"))

    assert isinstance(first, ParkedTurn)
    assert isinstance(second, ParkedTurn)
    assert [p.call.arguments["value"] for p in second.parked] == ["b"]
    assert second.unstarted == ()
    assert [m.content for m in journal.tool_results()] == ["echo:a"]


async def test_abort_while_parked_calls_settle_keeps_the_parked_round_open(
    autojump_clock: trio.testing.MockClock,
) -> None:
    abort = AbortSignal()
    parked = trio.Event()

    class SignallingGate(ScriptedGate):
        async def admit(self, call: ToolCall, tool: Tool) -> Admission:
            if call.arguments.get("value") == "risky":
                parked.set()
                return Park("needs approval")
            return Admit(call.arguments)

    gate = SignallingGate()
    journal = Journal(start_history())

    async def abort_once_parked() -> None:
        await parked.wait()
        abort.abort()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(abort_once_parked)
        with pytest.raises(TurnAbortedError) as caught:
            await turn(
                scripted(
                    call_step(
                        ("echo", {"value": "running", "seconds": 30}),
                        ("echo", {"value": "risky"}),
                        ("echo", {"value": "after"}),
                    )
                ),
                journal,
                toolbox(EchoTool()),
                gate=gate,
                abort=abort,
            )

    _, risky, after = journal.messages[2].calls
    assert caught.value.open_calls == (risky, after)
    [closed] = journal.tool_results()
    assert closed.content == "interrupted: the turn was aborted while echo was running"
    assert open_calls(journal.messages) == [risky, after]


def test_open_calls_finds_the_unanswered_calls_of_the_last_assistant_message() -> None:
    a, b = ToolCall("a", "echo", {}), ToolCall("b", "echo", {})
    history = [Message.user("x"), Message.assistant(None, [a, b])]
    assert open_calls(history) == [a, b]
    history.append(Message.tool("a", "echo", "ok", ok=True))
    assert open_calls(history) == [b]
    history.append(Message.tool("b", "echo", "ok", ok=True))
    assert open_calls(history) == []
    assert open_calls([Message.user("x")]) == []
    history.append(Message.assistant("done"))
    assert open_calls(history) == []
