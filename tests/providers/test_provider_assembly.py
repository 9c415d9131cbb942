"""Stream assembly: the sans-I/O assemblers fed parsed chunks, and lenient servers' dialects
through the real SDK path."""

from __future__ import annotations

import itertools
from typing import Any

import pytest
import trio
from anthropic.types import RawMessageStreamEvent
from hypothesis import given, settings
from hypothesis import strategies as st
from openai.types.chat import ChatCompletionChunk
from pydantic import TypeAdapter

from protocol.shapes import ToolCall, Usage
from robotad.agent.provider import ProviderError
from robotad.providers.anthropic import AnthropicProvider, MessageStreamAssembler
from robotad.providers.convert import tool_call
from robotad.providers.openai import ChatStreamAssembler, OpenAIProvider

from .conftest import NO_RETRIES, Recorder, Serve, user_request
from .fake_servers import Reply, anthropic_stream, openai_chunk, openai_stream, sse

_events = TypeAdapter(RawMessageStreamEvent)


def _chunk(delta: dict[str, Any], finish: str | None = None) -> ChatCompletionChunk:
    return ChatCompletionChunk.model_validate(
        {
            "id": "c",
            "object": "chat.completion.chunk",
            "created": 0,
            "model": "m",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        }
    )


def _split(text: str, cuts: list[int]) -> list[str]:
    points = sorted({min(cut, len(text)) for cut in cuts} | {0, len(text)})
    return [text[a:b] for a, b in itertools.pairwise(points)]


arguments = st.sampled_from(['{"path": "a/b.txt", "limit": 20}', '{"q": "ü ✓"}', "{", ""])


@settings(max_examples=100, deadline=None)
@given(
    texts=st.lists(arguments, min_size=1, max_size=3),
    cuts=st.lists(st.integers(0, 40), max_size=6),
    order=st.randoms(use_true_random=False),
)
def test_openai_call_pieces_interleaved_in_any_order_reassemble(
    texts: list[str], cuts: list[int], order: Any
) -> None:
    recorder = Recorder()
    assembler = ChatStreamAssembler()
    for index in range(len(texts)):
        assembler.feed(
            _chunk(
                {"tool_calls": [{"index": index, "id": f"id{index}", "function": {"name": "T"}}]}
            ),
            recorder,
        )
    pieces = [(index, piece) for index, text in enumerate(texts) for piece in _split(text, cuts)]
    # Shuffle across calls but keep each call's own pieces in order.
    lanes = {index: [p for i, p in pieces if i == index] for index in range(len(texts))}
    while any(lanes.values()):
        index = order.choice([i for i, lane in lanes.items() if lane])
        piece = lanes[index].pop(0)
        delta = {"tool_calls": [{"index": index, "function": {"arguments": piece}}]}
        assembler.feed(_chunk(delta), recorder)
    assembler.feed(_chunk({}, "tool_calls"), recorder)
    reply = assembler.reply()
    assert reply.tool_calls == [tool_call(f"id{i}", "T", text) for i, text in enumerate(texts)]
    assert recorder.texts == []
    # What is kept besides text is counted against the reply's bound: each call's frame in
    # the reply's JSON, its id, name and arguments.
    frame = len('{"id":"","type":"function","function":{"name":"","arguments":""}}')
    assert recorder.chars == sum(
        frame + len(f"id{index}") + len("T") + len(text) for index, text in enumerate(texts)
    )


@settings(max_examples=100, deadline=None)
@given(
    text=st.text(min_size=1, max_size=30),
    json_text=arguments,
    cuts=st.lists(st.integers(0, 40), max_size=6),
)
def test_anthropic_deltas_split_anywhere_reassemble(
    text: str, json_text: str, cuts: list[int]
) -> None:
    recorder = Recorder()
    assembler = MessageStreamAssembler()
    events = anthropic_stream(
        [{"text": _split(text, cuts)}, {"tool_use": ("tu", "T", _split(json_text, cuts))}]
    )
    for raw in events:
        if raw.startswith(b"event: ping"):
            continue  # the SDK drops pings before they reach the assembler
        assembler.feed(_events.validate_json(raw.decode().split("data: ", 1)[1]), recorder)
    reply = assembler.reply()
    assert reply.text == text
    assert "".join(recorder.texts) == text
    expected = tool_call("tu", "T", json_text) if json_text else ToolCall("tu", "T", {})
    assert reply.tool_calls == [expected]
    # The blocks' starts (what is not text) and the input's pieces count against the bound.
    starts = ['{"text":"","type":"text"}', '{"id":"tu","input":{},"name":"T","type":"tool_use"}']
    assert recorder.chars == sum(map(len, starts)) + len(json_text)


def test_openai_refusal_counts_as_text_and_other_choices_are_ignored() -> None:
    recorder = Recorder()
    assembler = ChatStreamAssembler()
    assembler.feed(_chunk({"refusal": "I can't"}), recorder)
    other = _chunk({"content": "from choice one"})
    other.choices[0].index = 1
    assembler.feed(other, recorder)
    assembler.feed(_chunk({}, "stop"), recorder)
    reply = assembler.reply()
    assert reply.text == "I can't"
    assert recorder.texts == ["I can't"]


async def test_a_number_where_a_string_belongs_reaches_the_reply_as_text(
    serve: Serve, recorder: Recorder
) -> None:
    """The SDKs build stream events without checking types: a server's number where a string
    belongs (a call's id and name, a finish or stop reason) reaches the reply as text, never as
    a number that history, the events and the session log refuse."""
    call = {"index": 0, "id": 5, "type": "function", "function": {"name": 7, "arguments": "{}"}}
    numbered = [
        event.replace(b'"finish_reason":"tool_calls"', b'"finish_reason":42')
        for event in openai_stream(tool_deltas=[[call]], finish_reason="tool_calls")
    ]
    stopped = [
        event.replace(b'"stop_reason":"end_turn"', b'"stop_reason":42')
        for event in anthropic_stream([{"text": ["hi"]}])
    ]
    openai_server = await serve(Reply(events=numbered))
    anthropic_server = await serve(Reply(events=stopped))
    common: dict[str, Any] = {"model": "m", "api_key": "k", "context_window": None}
    providers = [
        OpenAIProvider(name="o", base_url=f"{openai_server.base_url}/v1", **common),
        AnthropicProvider(name="a", base_url=anthropic_server.base_url, **common),
    ]
    try:
        with trio.fail_after(10):
            replies = [await p.complete(user_request(), recorder) for p in providers]
    finally:
        for provider in providers:
            await provider.aclose()
    assert replies[0].tool_calls == [ToolCall("5", "7", {})]
    assert [reply.stop_reason for reply in replies] == ["42", "42"]


async def test_openai_lenient_server_dialects(serve: Serve, recorder: Recorder) -> None:
    """Deltas without an index, a name repeated on every delta, arguments as an object, a call
    with no id at all and usage without a total — as some OpenAI-compatible servers send them."""
    deltas = [
        [{"id": "call_1", "function": {"name": "Read", "arguments": '{"path":'}}],
        [{"function": {"name": "Read", "arguments": '"a"}'}}],
        [{"id": "call_2", "function": {"name": "Glob", "arguments": {"pattern": "*"}}}],
        [{"index": 5, "function": {"name": "Bash", "arguments": ""}}],
    ]
    events = [openai_chunk({"tool_calls": d}) for d in deltas]
    events += [openai_chunk(finish_reason="tool_calls")]
    events += [openai_chunk(usage={"prompt_tokens": 12, "completion_tokens": 3}), sse("[DONE]")]
    server = await serve(Reply(events=events))
    provider = OpenAIProvider(
        name="local",
        model="qwen2.5-coder:7b",
        base_url=server.base_url + "/v1",
        api_key=None,
        context_window=None,
        retry_policy=NO_RETRIES,
    )
    try:
        assert provider.context_window == 32_768
        with trio.fail_after(10):
            reply = await provider.complete(user_request(), recorder)
    finally:
        await provider.aclose()
    first, second, third = reply.tool_calls
    assert first == ToolCall("call_1", "Read", {"path": "a"})
    assert second == ToolCall("call_2", "Glob", {"pattern": "*"})
    assert third.name == "Bash"
    assert third.arguments == {}
    assert third.id.startswith("call_")
    # usage without total_tokens: the total stays absent and `used` adds the two up
    assert reply.usage == Usage(12, 3)
    assert reply.usage.used == 15


async def test_anthropic_thinking_and_cache_usage(serve: Serve, recorder: Recorder) -> None:
    start = {
        "type": "message_start",
        "message": {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "model": "claude-x",
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": {
                "input_tokens": 5,
                "cache_read_input_tokens": 100,
                "cache_creation_input_tokens": 20,
                "output_tokens": 1,
            },
        },
    }

    def block(kind: str, index: int, payload: dict[str, Any]) -> bytes:
        return sse({"type": kind, "index": index, **payload}, kind)

    events = [
        sse(start, "message_start"),
        block("content_block_start", 0, {"content_block": {"type": "thinking", "thinking": ""}}),
        block("content_block_delta", 0, {"delta": {"type": "thinking_delta", "thinking": "hm"}}),
        block("content_block_delta", 0, {"delta": {"type": "signature_delta", "signature": "s"}}),
        block("content_block_stop", 0, {}),
        block("content_block_start", 1, {"content_block": {"type": "text", "text": "Hi"}}),
        block("content_block_delta", 1, {"delta": {"type": "text_delta", "text": "!"}}),
        block("content_block_stop", 1, {}),
        sse(
            {
                "type": "message_delta",
                "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                "usage": {"output_tokens": 12},
            },
            "message_delta",
        ),
        sse({"type": "message_stop"}, "message_stop"),
    ]
    server = await serve(Reply(events=events))
    provider = AnthropicProvider(
        name="c",
        model="claude-x",
        base_url=server.base_url,
        api_key="k-12345678",
        context_window=150_000,
        retry_policy=NO_RETRIES,
    )
    try:
        assert provider.context_window == 150_000
        with trio.fail_after(10):
            reply = await provider.complete(user_request(), recorder)
    finally:
        await provider.aclose()
    assert reply.text == "Hi!"
    assert recorder.texts == ["Hi", "!"]
    # Thinking counts against the reply's bound: its block's start, its pieces, its signature.
    assert recorder.chars == len('{"thinking":"","type":"thinking"}') + len("hm") + len("s")
    assert reply.usage == Usage(125, 12)
    assert reply.raw is not None
    assert reply.raw["content"] == [
        {"type": "thinking", "thinking": "hm", "signature": "s"},
        {"type": "text", "text": "Hi!"},
    ]
    assert reply.raw["usage"]["cache_read_input_tokens"] == 100


def test_openai_stream_without_finish_is_incomplete() -> None:
    assembler = ChatStreamAssembler()
    assembler.feed(_chunk({"content": "x"}), Recorder())
    with pytest.raises(ProviderError, match="before the reply was complete"):
        assembler.reply()
