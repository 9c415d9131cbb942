"""A reply calling a tool without a name is a failed model call, and nothing of it is kept.

Committed, the nameless call could never run, and every later request sent it back to a
provider that refuses it (OpenAI: ``^[a-zA-Z0-9_-]+$``; Anthropic: at least one character):
the session failed every turn after. Now the turn fails, its history is as before the reply,
and the next turn runs (G-209)."""

from __future__ import annotations

import pytest
import trio

from protocol.shapes import Message, ToolCall
from robotad.agent import AbortSignal, CompletedTurn, ModelCallFailed, TurnAbortedError
from robotad.agent.call_names import nameless_call
from robotad.agent.provider import ModelReply, ModelRequest, StreamObserver

from .loop_fakes import (
    EchoTool,
    FakeProvider,
    Journal,
    Recording,
    Replies,
    call_step,
    scripted,
    start_history,
    toolbox,
    turn,
)

#: Names no tool has: empty, and whitespace only (an ideographic space is whitespace too).
NAMELESS = ["", " ", "\t\n", "\u3000"]


class _Streams(FakeProvider):
    """Streams `text`, then replies with it and `calls`; an endpoint, as a server has."""

    name = "local"
    endpoint = "127.0.0.1:8080"

    def __init__(self, text: str, *calls: ToolCall) -> None:
        self.reply = ModelReply(text, list(calls), stop_reason="tool_calls", raw={"id": "r1"})

    async def complete(self, request: ModelRequest, observer: StreamObserver) -> ModelReply:
        await trio.lowlevel.checkpoint()
        observer.on_text(self.reply.text)
        return self.reply


@pytest.mark.parametrize("name", NAMELESS)
async def test_a_nameless_call_fails_the_turn_and_keeps_nothing_of_the_reply(name: str) -> None:
    echo = EchoTool()
    named = ToolCall("call-1", "echo", {"value": "first"})
    provider = _Streams("let me look", named, ToolCall("call-2", name, {}))
    journal = Journal(start_history())

    with pytest.raises(ModelCallFailed) as caught:
        await turn(provider, journal, toolbox(echo))

    what = "an empty name" if not name else f"a name of only whitespace ({name!r})"
    assert caught.value.reason == (
        f"127.0.0.1:8080: the model called a tool with {what} (tool call 2 of 2, id 'call-2'); "
        "a call without a name can never run, and sent back it would fail every later turn, "
        "so nothing of the reply was kept: send the prompt again"
    )
    assert caught.value.provider_name == "local"
    assert caught.value.refused is provider.reply  # what came back, for the session log
    # Neither the reply, its streamed text, nor the named call before the nameless one.
    assert journal.roles() == ["system", "user"]
    assert echo.received == []


async def test_the_next_turn_after_a_nameless_call_runs_and_sends_no_trace_of_it() -> None:
    """G-209: the session works again; the provider is never sent the refused reply."""
    provider = Recording(scripted(call_step(("  ", {"value": "x"})), {"text": "fine"}))
    journal = Journal(start_history("first"))

    with pytest.raises(ModelCallFailed):
        await turn(provider, journal, toolbox(EchoTool()))
    journal.messages.append(Message.user("second"))
    outcome = await turn(provider, journal, toolbox(EchoTool()))

    assert outcome == CompletedTurn("fine", rounds=1)
    assert [(m.role, m.content) for m in provider.requests[-1].messages] == [
        ("system", "You are a test."),
        ("user", "first"),
        ("user", "second"),
    ]


async def test_a_nameless_call_in_a_later_round_keeps_the_rounds_before_it() -> None:
    """G-207: history up to the failure stays, every completed round paired."""
    journal = Journal(start_history())
    provider = Replies(
        ModelReply("", [ToolCall("call-1", "echo", {"value": "a"})]),
        ModelReply("", [ToolCall("call-2", "", {})]),
    )

    with pytest.raises(ModelCallFailed) as caught:
        await turn(provider, journal, toolbox(EchoTool()))

    assert "empty name (tool call 1 of 1, id 'call-2')" in caught.value.reason
    assert journal.roles() == ["system", "user", "assistant", "tool"]


async def test_an_abort_taken_before_the_nameless_reply_was_judged_still_wins() -> None:
    """As for any failed call (decision 42): the streamed text is kept as interrupted."""
    abort = AbortSignal()

    class AbortsThenReplies(FakeProvider):
        async def complete(self, request: ModelRequest, observer: StreamObserver) -> ModelReply:
            observer.on_text("partial ")
            abort.abort()
            return ModelReply("partial ", [ToolCall("call-1", "", {})])

    journal = Journal(start_history())
    with pytest.raises(TurnAbortedError):
        await turn(AbortsThenReplies(), journal, abort=abort)

    assert journal.messages[-1].content == "partial "
    assert journal.messages[-1].state == "interrupted"
    assert journal.messages[-1].calls == []


async def test_an_unknown_tool_name_is_still_the_model_s_choice() -> None:
    """Padding or an unknown name is a name: the call is answered (G-204), not refused."""
    journal = Journal(start_history())

    outcome = await turn(Replies(ModelReply("", [ToolCall("c", " echo", {})])), journal)

    assert outcome == CompletedTurn("done", rounds=2)
    assert "unknown tool ' echo'" in (journal.tool_results()[0].content or "")


def test_a_long_name_or_id_is_quoted_cut_short() -> None:
    reason = nameless_call([ToolCall("i" * 100, " " * 5000, {})])

    assert reason is not None
    assert f"({' ' * 40!r}… (5000 characters))" in reason
    assert f"id {'i' * 40!r}… (100 characters)" in reason
    assert len(reason) < 400


def test_calls_that_all_have_names_are_fine() -> None:
    assert nameless_call([]) is None
    assert nameless_call([ToolCall("a", "Read", {}), ToolCall("b", "x", {})]) is None
