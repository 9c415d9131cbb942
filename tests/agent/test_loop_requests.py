"""What each provider call is asked: per-turn tool choice, ephemeral system context, effort."""

from __future__ import annotations

from robotad.agent.provider import NamedTool

from .loop_fakes import (
    EchoTool,
    Journal,
    Recording,
    call_step,
    scripted,
    start_history,
    toolbox,
    turn,
)


def _two_round_script() -> list[dict[str, object]]:
    return [call_step(("echo", {"value": "a"})), {"text": "done"}]


async def test_g057_a_per_turn_tool_choice_reaches_only_that_turns_call() -> None:
    """G-057: a per-turn toolChoice reaches that turn's provider call only; later rounds of
    the turn go back to "auto" (a forced choice on every round could never end), and the next
    turn, run with the default, is unchanged."""
    provider = Recording(scripted(*_two_round_script(), *_two_round_script()))
    journal = Journal(start_history())
    tools = toolbox(EchoTool())

    await turn(provider, journal, tools, tool_choice="required")
    journal.messages.append(start_history("again", system=None)[0])
    await turn(provider, journal, tools)

    assert [r.tool_choice for r in provider.requests] == ["required", "auto", "auto", "auto"]


async def test_a_named_tool_choice_applies_to_the_first_call_of_its_turn() -> None:
    provider = Recording(scripted(*_two_round_script()))
    await turn(
        provider, Journal(start_history()), toolbox(EchoTool()), tool_choice=NamedTool("echo")
    )
    assert [r.tool_choice for r in provider.requests] == [NamedTool("echo"), "auto"]


async def test_tool_choice_none_holds_for_every_round_of_its_turn() -> None:
    provider = Recording(scripted(*_two_round_script()))
    await turn(provider, Journal(start_history()), toolbox(EchoTool()), tool_choice="none")
    assert [r.tool_choice for r in provider.requests] == ["none", "none"]


async def test_g048_system_context_reaches_every_call_of_its_turn_as_a_system_block() -> None:
    """G-048: a turn's systemContext reaches that turn's model calls as a system-role message,
    right after the leading system prompt."""
    provider = Recording(scripted(*_two_round_script()))
    journal = Journal(start_history("what changed?"))

    await turn(provider, journal, toolbox(EchoTool()), system_context="Branch: main, 3 dirty")

    for request in provider.requests:
        roles = [m.role for m in request.messages]
        assert roles[:3] == ["system", "system", "user"]
        assert request.messages[0].content == "You are a test."
        assert request.messages[1].content == "Branch: main, 3 dirty"


async def test_g049_system_context_is_never_committed_nor_seen_by_a_later_turn() -> None:
    """G-049: systemContext never enters history and is absent from every later turn's call."""
    provider = Recording(scripted({"text": "one"}, {"text": "two"}))
    journal = Journal(start_history())

    await turn(provider, journal, system_context="EPHEMERAL-CONTEXT")
    journal.messages.append(start_history("next", system=None)[0])
    await turn(provider, journal)

    assert all(m.content != "EPHEMERAL-CONTEXT" for m in journal.messages)
    later = provider.requests[1]
    assert all(m.content != "EPHEMERAL-CONTEXT" for m in later.messages)
    assert [m.role for m in later.messages] == ["system", "user", "assistant", "user"]


async def test_system_context_without_a_system_prompt_goes_first() -> None:
    provider = Recording(scripted({"text": "ok"}))
    await turn(provider, Journal(start_history(system=None)), system_context="ctx")
    assert [(m.role, m.content) for m in provider.requests[0].messages] == [
        ("system", "ctx"),
        ("user", "hello"),
    ]


async def test_requests_carry_the_tool_schemas_effort_and_turn_purpose() -> None:
    provider = Recording(scripted({"text": "ok"}))
    await turn(provider, Journal(start_history()), toolbox(EchoTool()), effort="high")
    [request] = provider.requests
    assert [schema.name for schema in request.tools] == ["echo"]
    assert request.tools[0].input_schema["properties"].keys() == {"value", "seconds"}
    assert request.effort == "high"
    assert request.purpose == "turn"
