"""Every way a tool call can fail ends as a failed tool result paired with its call."""

from __future__ import annotations

from typing import Any

import pytest
import trio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from protocol.shapes import Message, ToolCall
from robotad.agent import CompletedTurn, Refuse
from robotad.agent.gate import Admission, Admit
from robotad.agent.provider import ModelReply
from robotad.agent.tool import Tool

from .loop_fakes import (
    BrokenTool,
    EchoTool,
    FailingTool,
    Journal,
    Replies,
    ScriptedGate,
    call_step,
    paired,
    scripted,
    start_history,
    toolbox,
    turn,
)


def _reply(*calls: ToolCall) -> ModelReply:
    return ModelReply("", list(calls))


async def test_g204_unknown_tool_is_a_failed_result_without_asking_the_gate() -> None:
    """G-204: a call to an unknown tool comes back as a failed tool result paired with it."""
    gate = ScriptedGate()
    journal = Journal(start_history())

    outcome = await turn(
        scripted(call_step(("Teleport", {"to": "mars"})), {"text": "sorry"}),
        journal,
        toolbox(EchoTool()),
        gate=gate,
    )

    assert outcome == CompletedTurn("sorry", rounds=2)
    [result] = journal.tool_results()
    assert not result.ok
    assert "unknown tool 'Teleport'" in (result.content or "")
    assert "echo" in (result.content or "")  # the model is told what exists
    assert gate.asked == []
    assert gate.rejected == [result.tool_call_id]  # the gate is told, so clients can be
    assert paired(journal.messages)


async def test_g205_unparseable_argument_text_is_a_failed_result() -> None:
    """G-205: a call whose argument text is not JSON keeps it as rawArguments with arguments
    {} and gets a failed result; the tool never runs."""
    echo = EchoTool()
    bad = ToolCall("call-1", "echo", {}, raw_arguments='{"value": "unterminated')
    journal = Journal(start_history())

    outcome = await turn(Replies(_reply(bad)), journal, toolbox(echo))

    assert outcome == CompletedTurn("done", rounds=2)
    assert journal.messages[2].calls == [bad]
    [result] = journal.tool_results()
    assert result.tool_call_id == "call-1"
    assert not result.ok
    assert "not valid JSON" in (result.content or "")
    assert echo.received == []


async def test_arguments_the_tool_refuses_are_a_failed_result() -> None:
    echo = EchoTool()
    journal = Journal(start_history())

    await turn(
        scripted(call_step(("echo", {"value": 3, "colour": "red"})), {"text": "ok"}),
        journal,
        toolbox(echo),
    )

    [result] = journal.tool_results()
    assert not result.ok
    assert "invalid arguments for echo" in (result.content or "")
    assert echo.received == []


async def test_a_tool_that_raises_is_a_failed_result_and_the_turn_goes_on() -> None:
    journal = Journal(start_history())

    outcome = await turn(
        scripted(call_step(("broken", {})), {"text": "recovered"}), journal, toolbox(BrokenTool())
    )

    assert outcome == CompletedTurn("recovered", rounds=2)
    [result] = journal.tool_results()
    assert not result.ok
    assert result.content == "broken failed: RuntimeError: disk on fire"


async def test_an_ordinary_failure_keeps_the_tools_content_and_metadata() -> None:
    journal = Journal(start_history())

    await turn(
        scripted(call_step(("failing", {})), {"text": "ok"}), journal, toolbox(FailingTool())
    )

    [result] = journal.tool_results()
    assert not result.ok
    assert result.content == "exit status 1"
    assert result.metadata == {"ok": False, "exitCode": 1}


async def test_g202_g203_a_refusal_is_a_failed_result_never_an_error() -> None:
    """G-202, G-203 (the loop's half): whatever the gate refuses — a permission denial or a
    blocking hook — reaches the model as a failed result paired with its call; the turn goes
    on and the body never runs."""
    echo = EchoTool()
    gate = ScriptedGate(lambda call: Refuse("denied by rule Bash(rm:*)"))
    journal = Journal(start_history())

    outcome = await turn(
        scripted(call_step(("echo", {"value": "x"})), {"text": "understood"}),
        journal,
        toolbox(echo),
        gate=gate,
    )

    assert outcome == CompletedTurn("understood", rounds=2)
    [result] = journal.tool_results()
    assert result.content == "denied by rule Bash(rm:*)"
    assert not result.ok
    assert echo.received == []
    assert gate.settled == []


async def test_the_tool_runs_with_the_admitted_arguments_and_commits_the_settled_result() -> None:
    echo = EchoTool()
    gate = ScriptedGate(lambda call: Admit({**call.arguments, "value": "canonical"}))
    gate.settle_content = lambda content: f"tool-result:{len(content)}"
    journal = Journal(start_history())

    await turn(
        scripted(call_step(("echo", {"value": "./relative"})), {"text": "ok"}),
        journal,
        toolbox(echo),
        gate=gate,
    )

    assert [a.value for a in echo.received] == ["canonical"]
    [result] = journal.tool_results()
    assert result.content == "tool-result:14"  # "echo:canonical" went through settle


async def test_admitted_arguments_the_tool_refuses_are_a_failed_result() -> None:
    echo = EchoTool()
    gate = ScriptedGate(lambda call: Admit({"value": 42}))
    journal = Journal(start_history())

    await turn(
        scripted(call_step(("echo", {"value": "x"})), {"text": "ok"}),
        journal,
        toolbox(echo),
        gate=gate,
    )

    [result] = journal.tool_results()
    assert not result.ok
    assert "invalid arguments for echo" in (result.content or "")
    assert echo.received == []


async def test_a_gate_failure_propagates_and_leaves_the_round_open() -> None:
    class JournalDown(Exception):
        pass

    journal = Journal(start_history())
    first_committed = trio.Event()

    class FailingSecondAdmission(ScriptedGate):
        async def admit(self, call: ToolCall, tool: Tool) -> Admission:
            if call.arguments["value"] == "second":
                await first_committed.wait()
                raise JournalDown()
            return Admit(call.arguments)

    async def commit(message: Message) -> None:
        await Journal.commit(journal, message)
        if message.content == "echo:first":
            first_committed.set()

    journal.commit = commit  # type: ignore[method-assign]

    with pytest.raises(JournalDown):
        await turn(
            scripted(
                call_step(
                    ("echo", {"value": "first"}),
                    ("echo", {"value": "second"}),
                    ("echo", {"value": "third"}),
                )
            ),
            journal,
            toolbox(EchoTool()),
            gate=FailingSecondAdmission(),
        )

    assert journal.roles() == ["system", "user", "assistant", "tool"]
    assert [m.content for m in journal.tool_results()] == ["echo:first"]


async def test_a_commit_failure_propagates_as_itself() -> None:
    journal = Journal(start_history())
    journal.fail_when = lambda message: message.role == "tool"

    with pytest.raises(OSError, match="journal write failed"):
        await turn(
            scripted(call_step(("echo", {"value": "a"})), {"text": "never"}),
            journal,
            toolbox(EchoTool()),
        )

    assert journal.roles() == ["system", "user", "assistant"]


_KINDS = ("ok", "unknown", "raw", "bad-args", "raises", "refused", "fails")


def _call(index: int, kind: str) -> ToolCall:
    call_id = f"c{index}"
    arguments: dict[str, Any] = {"value": call_id}
    match kind:
        case "unknown":
            return ToolCall(call_id, "nope", arguments)
        case "raw":
            return ToolCall(call_id, "echo", {}, raw_arguments="{not json")
        case "bad-args":
            return ToolCall(call_id, "echo", {"value": call_id, "extra": True})
        case "raises":
            return ToolCall(call_id, "broken", {})
        case "fails":
            return ToolCall(call_id, "failing", {})
        case "refused":
            return ToolCall(call_id, "echo", {"value": "refuse-me"})
    return ToolCall(call_id, "echo", arguments)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.lists(st.sampled_from(_KINDS), min_size=1, max_size=7), max_size=4))
def test_every_call_of_every_round_gets_exactly_one_result_in_call_order(
    rounds: list[list[str]],
) -> None:
    """Whatever mix of good and broken calls a model sends, history stays paired."""

    def decide(call: ToolCall) -> Admission:
        if call.arguments.get("value") == "refuse-me":
            return Refuse("no")
        return Admit(call.arguments)

    replies = [
        _reply(*(_call(r * 10 + i, kind) for i, kind in enumerate(kinds)))
        for r, kinds in enumerate(rounds)
    ]
    journal = Journal(start_history())

    async def main() -> None:
        tools = toolbox(EchoTool(), BrokenTool(), FailingTool())
        await turn(Replies(*replies), journal, tools, gate=ScriptedGate(decide))

    trio.run(main)

    assert paired(journal.messages)
    results = journal.tool_results()
    expected_ok = [kind == "ok" for kinds in rounds for kind in kinds]
    assert [m.ok for m in results] == expected_ok
    assert journal.messages[-1].content == "done"
