"""The round limit (PROTOCOL §10.2): a turn stops before the call that would exceed it."""

from __future__ import annotations

from protocol.shapes import Message, ToolCall
from robotad.agent import CompletedTurn

from .loop_fakes import (
    EchoTool,
    Journal,
    Recording,
    call_step,
    paired,
    scripted,
    start_history,
    toolbox,
    turn,
)


async def test_the_limit_completes_the_turn_with_every_call_answered() -> None:
    steps = [call_step(("echo", {"value": str(n)}), text=f"round {n}") for n in range(5)]
    provider = Recording(scripted(*steps))
    journal = Journal(start_history())

    outcome = await turn(provider, journal, toolbox(EchoTool()), round_cap=3)

    assert outcome == CompletedTurn("round 2", rounds=3, stop_reason="maxRounds")
    assert len(provider.requests) == 3  # the fourth call is never made
    assert len(journal.tool_results()) == 3
    assert journal.roles()[-1] == "tool"
    assert paired(journal.messages)


async def test_a_reply_without_calls_within_the_limit_ends_normally() -> None:
    provider = scripted(call_step(("echo", {"value": "a"})), {"text": "done"})
    journal = Journal(start_history())

    outcome = await turn(provider, journal, toolbox(EchoTool()), round_cap=2)

    assert outcome == CompletedTurn("done", rounds=2, stop_reason="end")


async def test_a_limit_of_one_with_a_text_reply_ends_normally() -> None:
    journal = Journal(start_history())

    outcome = await turn(scripted({"text": "hi"}), journal, round_cap=1)

    assert outcome == CompletedTurn("hi", rounds=1, stop_reason="end")


async def test_a_continuation_counts_the_rounds_its_turn_made_before() -> None:
    """A parked round continued later: its calls run, and a turn that already made `cap`
    provider calls stops there instead of calling the model again."""
    call = ToolCall(id="c1", name="echo", arguments={"value": "x"})
    history = [*start_history(), Message.assistant("looking", [call])]
    provider = Recording(scripted({"text": "never asked"}))
    journal = Journal(history)

    outcome = await turn(provider, journal, toolbox(EchoTool()), round_cap=1)

    assert outcome == CompletedTurn("looking", rounds=0, stop_reason="maxRounds")
    assert provider.requests == []
    assert [m.content for m in journal.tool_results()] == ["echo:x"]
    assert paired(journal.messages)


async def test_a_continuation_under_the_limit_calls_the_model_again() -> None:
    call = ToolCall(id="c1", name="echo", arguments={"value": "x"})
    history = [*start_history(), Message.assistant(None, [call])]
    provider = Recording(scripted({"text": "after"}))
    journal = Journal(history)

    outcome = await turn(provider, journal, toolbox(EchoTool()), round_cap=2)

    assert outcome == CompletedTurn("after", rounds=1, stop_reason="end")
    assert len(provider.requests) == 1
