"""Rounds: text replies, tool rounds, ordering and concurrency of tool calls, provider failure."""

from __future__ import annotations

import pytest
import trio

from protocol.shapes import Message, ToolCall
from robotad.agent import (
    MAX_CONCURRENT_TOOLS,
    CompletedTurn,
    ModelCallFailed,
    TurnCallbacks,
)
from robotad.agent.provider import ModelReply, ModelRequest, StreamObserver

from .loop_fakes import (
    EchoTool,
    FakeProvider,
    Journal,
    Recording,
    Replies,
    ScriptedGate,
    call_step,
    paired,
    scripted,
    start_history,
    toolbox,
    turn,
)


async def test_text_reply_completes_the_turn_with_usage_in_metadata() -> None:
    journal = Journal(start_history("hi"))
    provider = scripted({"text": "Hello there", "usage": {"inputTokens": 12, "outputTokens": 3}})

    outcome = await turn(provider, journal)

    assert outcome == CompletedTurn("Hello there", rounds=1)
    assert journal.roles() == ["system", "user", "assistant"]
    reply = journal.messages[-1]
    assert reply.content == "Hello there"
    assert reply.state == "complete"
    assert reply.usage is not None
    assert reply.usage.used == 15


async def test_tool_rounds_continue_until_a_reply_without_calls() -> None:
    echo = EchoTool()
    journal = Journal(start_history())
    provider = Recording(
        scripted(
            call_step(("echo", {"value": "one"}), text="Let me look."),
            call_step(("echo", {"value": "two"})),
            {"text": "All done."},
        )
    )

    outcome = await turn(provider, journal, toolbox(echo))

    assert outcome == CompletedTurn("All done.", rounds=3)
    assert journal.roles() == [
        "system",
        "user",
        "assistant",
        "tool",
        "assistant",
        "tool",
        "assistant",
    ]
    assert [m.content for m in journal.tool_results()] == ["echo:one", "echo:two"]
    assert all(m.ok for m in journal.tool_results())
    assert journal.messages[2].content == "Let me look."
    assert journal.messages[4].content is None  # a reply of calls only has no text
    # Each round's request carries everything committed before it.
    assert [len(r.messages) for r in provider.requests] == [2, 4, 6]
    assert provider.requests[2].messages[-1].content == "echo:two"
    assert paired(journal.messages)


async def test_g044_fifty_tool_rounds_run_without_a_cap() -> None:
    """G-044: with no round cap, a turn runs as many provider/tool rounds as the model asks."""
    steps = [call_step(("echo", {"value": str(n)})) for n in range(50)]
    journal = Journal(start_history())

    outcome = await turn(scripted(*steps, {"text": "finished"}), journal, toolbox(EchoTool()))

    assert outcome == CompletedTurn("finished", rounds=51)
    assert len(journal.tool_results()) == 50
    assert paired(journal.messages)


async def test_results_are_committed_in_call_order_whatever_finishes_first(
    autojump_clock: trio.testing.MockClock,
) -> None:
    echo = EchoTool()
    calls = [("echo", {"value": v, "seconds": s}) for v, s in (("a", 3), ("b", 2), ("c", 1))]
    journal = Journal(start_history())

    await turn(scripted(call_step(*calls), {"text": "ok"}), journal, toolbox(echo))

    assert echo.finished == ["c", "b", "a"]  # they ran concurrently and finished in reverse
    assert [m.content for m in journal.tool_results()] == ["echo:a", "echo:b", "echo:c"]
    assert paired(journal.messages)


async def test_at_most_five_tool_bodies_run_at_once(autojump_clock: trio.testing.MockClock) -> None:
    echo = EchoTool()
    calls = [("echo", {"value": str(n), "seconds": 1}) for n in range(12)]
    journal = Journal(start_history())

    await turn(scripted(call_step(*calls), {"text": "ok"}), journal, toolbox(echo))

    assert MAX_CONCURRENT_TOOLS == 5
    assert echo.most_running == 5
    assert [m.content for m in journal.tool_results()] == [f"echo:{n}" for n in range(12)]


async def test_text_deltas_reach_on_text_and_callbacks_see_each_round() -> None:
    deltas: list[str] = []
    seen: list[str] = []
    journal = Journal(start_history())

    async def on_request(request: ModelRequest) -> None:
        seen.append(f"request:{len(request.messages)}")

    async def on_reply(reply: ModelReply) -> None:
        # The reply is committed before on_reply runs, so exact usage matches history.
        assert journal.messages[-1].role == "assistant"
        seen.append(f"reply:{reply.text}")

    callbacks = TurnCallbacks(on_text=deltas.append, on_request=on_request, on_reply=on_reply)
    provider = scripted(call_step(("echo", {"value": "x"})), {"text": "abcdefg", "chunks": 3})

    await turn(provider, journal, toolbox(EchoTool()), callbacks=callbacks)

    assert deltas == ["abc", "de", "fg"]
    assert seen == ["request:2", "reply:", "request:4", "reply:abcdefg"]


async def test_a_raising_text_sink_does_not_cut_the_stream() -> None:
    def sink(delta: str) -> None:
        raise ValueError("broken renderer")

    journal = Journal(start_history())
    outcome = await turn(
        scripted({"text": "fine", "chunks": 2}), journal, callbacks=TurnCallbacks(on_text=sink)
    )
    assert outcome == CompletedTurn("fine", rounds=1)


async def test_g207_provider_error_fails_the_turn_keeping_completed_rounds() -> None:
    """G-207: a failed run keeps history up to the failure: the user message and every
    completed round; text the failed call had streamed is not committed."""
    journal = Journal(start_history("do it"))
    provider = scripted(
        call_step(("echo", {"value": "first"})),
        {"text": "half a thou", "chunks": 2, "error": "upstream 503"},
    )

    with pytest.raises(ModelCallFailed) as caught:
        await turn(provider, journal, toolbox(EchoTool()))

    assert caught.value.reason == "upstream 503"
    assert caught.value.provider_name == "scripted"
    assert journal.roles() == ["system", "user", "assistant", "tool"]
    assert paired(journal.messages)


class _Exploding(FakeProvider):
    name = "exploding"
    endpoint = "127.0.0.1:8080"

    async def complete(self, request: ModelRequest, observer: StreamObserver) -> ModelReply:
        raise KeyError("Authorization: Bearer sk-live-123")


async def test_an_unexpected_provider_exception_is_a_provider_failure_without_its_text() -> None:
    journal = Journal(start_history())

    with pytest.raises(ModelCallFailed) as caught:
        await turn(_Exploding(), journal)

    # Where it happened, as every other provider failure says: which server's call broke.
    assert caught.value.reason == "127.0.0.1:8080: unexpected KeyError from the provider"
    assert "sk-live" not in str(caught.value)
    assert "sk-live" not in caught.value.reason
    assert caught.value.__cause__ is None
    assert journal.roles() == ["system", "user"]


async def test_history_is_read_not_mutated() -> None:
    history = start_history()
    before = list(history)
    journal = Journal(history)

    await turn(scripted({"text": "x"}), journal)

    assert history == before
    assert isinstance(journal.messages[-1], Message)


async def test_a_repeated_call_id_gets_a_fresh_one_before_it_is_committed() -> None:
    """A server that reuses a call id (one already in history, or twice in one reply) gets
    each later call under a fresh id: the gate, the results and the reply the callback sees
    all name it, so every call is paired with its own result."""
    earlier = [
        Message.assistant(None, [ToolCall("call_0", "echo", {"value": "old"})]),
        Message.tool("call_0", "echo", "echo:old", ok=True),
    ]
    journal = Journal([*start_history("go"), *earlier])
    repeated = [ToolCall("call_0", "echo", {"value": "a"}), ToolCall("call_0", "echo", {})]
    provider = Replies(ModelReply("", repeated))
    gate = ScriptedGate()
    seen: list[ModelReply] = []

    async def on_reply(reply: ModelReply) -> None:
        seen.append(reply)

    await turn(
        provider,
        journal,
        toolbox(EchoTool()),
        gate=gate,
        callbacks=TurnCallbacks(on_reply=on_reply),
    )

    committed = journal.messages[len(earlier) + 2]
    ids = [call.id for call in committed.calls]
    assert "call_0" not in ids
    assert len(set(ids)) == 2
    assert [call.arguments for call in committed.calls] == [c.arguments for c in repeated]
    assert gate.asked == ids
    assert [call.id for call in seen[0].tool_calls] == ids
    assert [m.tool_call_id for m in journal.tool_results()] == ["call_0", *ids]
    assert paired(journal.messages)
