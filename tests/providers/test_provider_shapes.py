"""A stream whose data is JSON but not the documented shape: the turn's failure names the member
that is wrong instead of "unexpected AttributeError from the provider", and is not retried;
nonsense token counts only leave the reply without usage; an Anthropic event of a type the
API may add later is left out. Against a loopback fake server, as real servers send them."""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest
import trio

from robotad.agent.provider import ProviderError
from robotad.providers.anthropic import AnthropicProvider
from robotad.providers.openai import OpenAIProvider

from .conftest import (
    QUICK_RETRIES,
    SECRET_KEY,
    ProviderCloser,
    Recorder,
    Serve,
    cause_of,
    fake_served,
    user_request,
)
from .fake_servers import Reply, anthropic_stream, openai_chunk, sse

_FINISH = openai_chunk(finish_reason="stop")


def _chunk(choices: object = None, **members: object) -> bytes:
    data: dict[str, Any] = {"id": "c", "object": "chat.completion.chunk", "model": "m"}
    data["choices"] = choices if choices is not None else []
    return sse({**data, **members})


@pytest.mark.parametrize(
    ("event", "named"),
    [
        (sse([1, 2]), "the chunk is a list, not an object"),
        (_chunk("abc"), "choices is a string, not a list"),
        (_chunk([None]), "choices[0] is null, not an object"),
        (_chunk([{"index": 0, "delta": "hi"}]), "choices[0].delta is a string, not an object"),
        (_chunk([{"index": 0, "delta": {"content": 5}}]), "choices[0].delta.content is a number"),
        (
            _chunk([{"index": 0, "delta": {"tool_calls": [{"index": 0, "function": "f"}]}}]),
            "choices[0].delta.tool_calls[0].function is a string, not an object",
        ),
        (_chunk(usage=7), "usage is a number, not an object"),
    ],
)
async def test_an_openai_chunk_of_another_shape_is_named_and_not_retried(
    event: bytes, named: str, serve: Serve, closing: ProviderCloser, recorder: Recorder
) -> None:
    server = await serve(Reply(events=[event, _FINISH, sse("[DONE]")]))
    provider = closing(fake_served(OpenAIProvider, server.base_url + "/v1", QUICK_RETRIES))
    with trio.fail_after(10), pytest.raises(ProviderError) as caught:
        await provider.complete(user_request(), recorder)
    cause = cause_of(caught.value)
    assert cause.startswith("the server sent a chunk that is no Chat Completions chunk: ")
    assert named in cause
    assert len(server.requests) == 1


def _anthropic_event(kind: str, **members: object) -> bytes:
    return sse({"type": kind, **members}, kind)


@pytest.mark.parametrize(
    ("event", "named"),
    [
        (_anthropic_event("message_delta", delta=None), "message_delta.delta is null"),
        (
            _anthropic_event("content_block_start", index=5, content_block="x"),
            "content_block_start.content_block is a string, not an object",
        ),
        (
            _anthropic_event(
                "content_block_start", index=None, content_block={"type": "text", "text": ""}
            ),
            "content_block_start.index is null, not an integer",
        ),
        (
            _anthropic_event(
                "content_block_delta", index=0, delta={"type": "text_delta", "text": 5}
            ),
            "content_block_delta.delta.text is a number, not a string",
        ),
    ],
)
async def test_an_anthropic_event_of_another_shape_is_named_and_not_retried(
    event: bytes, named: str, serve: Serve, closing: ProviderCloser, recorder: Recorder
) -> None:
    events = anthropic_stream([{"text": ["hi"]}])
    server = await serve(Reply(events=[*events[:2], event, *events[2:]]))
    provider = closing(fake_served(AnthropicProvider, server.base_url, QUICK_RETRIES))
    with trio.fail_after(10), pytest.raises(ProviderError) as caught:
        await provider.complete(user_request(), recorder)
    cause = cause_of(caught.value)
    assert cause.startswith("the server sent an event that is no Messages event: ")
    assert named in cause
    assert len(server.requests) == 1


async def test_an_anthropic_event_of_a_later_type_is_left_out(
    serve: Serve, closing: ProviderCloser, recorder: Recorder
) -> None:
    events = anthropic_stream([{"text": ["hi"]}])
    newer = _anthropic_event("message_annotation", annotation={"kind": "new"})
    server = await serve(Reply(events=[*events[:2], newer, *events[2:]]))
    provider = closing(fake_served(AnthropicProvider, server.base_url))
    with trio.fail_after(10):
        reply = await provider.complete(user_request(), recorder)
    assert reply.text == "hi"
    assert reply.stop_reason == "end_turn"
    # Not read as a message_start without a message (the SDK's guess for an unknown type).
    assert reply.usage is not None
    assert reply.usage.input_tokens == 10
    assert reply.raw is not None
    assert reply.raw["id"] == "msg_fake"


@pytest.mark.parametrize("count", ['"many"', "NaN", "1e400", "1.5"])
async def test_a_token_count_that_is_no_whole_number_leaves_the_reply_without_usage(
    count: str,
    serve: Serve,
    closing: ProviderCloser,
    recorder: Recorder,
    caplog: pytest.LogCaptureFixture,
) -> None:
    usage = sse(
        f'{{"id":"c","choices":[],"usage":{{"prompt_tokens":{count},"completion_tokens":1}}}}'
    )
    server = await serve(Reply(events=[openai_chunk({"content": "hi"}), _FINISH, usage]))
    provider = closing(fake_served(OpenAIProvider, server.base_url + "/v1"))
    with trio.fail_after(10), caplog.at_level(logging.WARNING, "robotad.providers"):
        reply = await provider.complete(user_request(), recorder)
    assert (reply.text, reply.usage) == ("hi", None)
    assert "usage ignored" in caplog.text
    assert "many" not in caplog.text  # the server's text stays out of the log


async def test_anthropic_counts_that_are_no_whole_number_leave_the_reply_without_usage(
    serve: Serve, closing: ProviderCloser, recorder: Recorder
) -> None:
    events = anthropic_stream([{"text": ["hi"]}])
    bad = _anthropic_event(
        "message_delta", delta={"stop_reason": "end_turn"}, usage={"output_tokens": "x"}
    )
    server = await serve(Reply(events=[*events[:-2], bad, events[-1]]))
    provider = closing(fake_served(AnthropicProvider, server.base_url))
    with trio.fail_after(10):
        reply = await provider.complete(user_request(), recorder)
    assert (reply.text, reply.usage) == ("hi", None)


async def test_a_whole_count_sent_as_a_float_still_counts(
    serve: Serve, closing: ProviderCloser, recorder: Recorder
) -> None:
    usage = sse('{"id":"c","choices":[],"usage":{"prompt_tokens":12.0,"completion_tokens":3}}')
    server = await serve(Reply(events=[openai_chunk({"content": "hi"}), _FINISH, usage]))
    provider = closing(fake_served(OpenAIProvider, server.base_url + "/v1"))
    with trio.fail_after(10):
        reply = await provider.complete(user_request(), recorder)
    assert reply.usage is not None
    assert (reply.usage.input_tokens, reply.usage.output_tokens) == (12, 3)


_NOT_UTF8 = b'data: {"id":"c","choices":[{"index":0,"delta":{"content":"\xff\xfe"}}]}\n\n'
_HUGE_NUMBER = sse('{"id":"c","choices":[],"usage":{"prompt_tokens":1%s}}' % ("0" * 5000))


@pytest.mark.parametrize("vendor", [OpenAIProvider, AnthropicProvider])
@pytest.mark.parametrize(
    ("event", "named"),
    [
        (_NOT_UTF8, "the server sent an event that is not UTF-8 text (byte 0xff)"),
        (_HUGE_NUMBER, "not JSON robotad reads (a number of more than 4300 digits)"),
    ],
)
async def test_an_event_the_sdk_cannot_decode_is_named_and_not_retried(
    vendor: type[OpenAIProvider] | type[AnthropicProvider],
    event: bytes,
    named: str,
    serve: Serve,
    closing: ProviderCloser,
    recorder: Recorder,
) -> None:
    if vendor is OpenAIProvider:
        events, path = [event, _FINISH, sse("[DONE]")], "/v1"
    else:
        whole = anthropic_stream([{"text": ["hi"]}])
        events, path = [*whole[:2], event.replace(b"data:", b"event: x\ndata:"), *whole[2:]], ""
    server = await serve(Reply(events=events))
    provider = closing(fake_served(vendor, server.base_url + path, QUICK_RETRIES))
    with trio.fail_after(10), pytest.raises(ProviderError) as caught:
        await provider.complete(user_request(), recorder)
    assert named in cause_of(caught.value)
    assert len(server.requests) == 1


def _json(body: object) -> Reply:
    return Reply(body=json.dumps(body).encode())


@pytest.mark.parametrize("vendor", [OpenAIProvider, AnthropicProvider])
@pytest.mark.parametrize(
    ("answer", "named"),
    [
        (
            _json({"error": {"message": f"model overloaded {SECRET_KEY}", "code": 503}}),
            "the server answered with an error, not a stream: model overloaded [redacted]",
        ),
        (
            _json({"object": "chat.completion", "choices": [{"message": {"content": "hi"}}]}),
            "the server answered with a whole reply (application/json), not an event stream: "
            "it does not stream",
        ),
        (
            _json({"type": "message", "content": [{"type": "text", "text": "hi"}]}),
            "the server answered with a whole reply (application/json), not an event stream",
        ),
        (
            Reply(body=b"not json", content_type="application/json"),
            "the server answered with application/json, not an event stream: does base_url",
        ),
    ],
)
async def test_a_json_answer_where_a_stream_belongs_says_what_it_was(
    vendor: type[OpenAIProvider] | type[AnthropicProvider],
    answer: Reply,
    named: str,
    serve: Serve,
    closing: ProviderCloser,
    recorder: Recorder,
) -> None:
    """A server that answers 200 with an error in JSON, or with a whole reply because it does
    not stream, is not sent looking for a wrong base_url; G-206: no key in the reason."""
    server = await serve(answer)
    path = "/v1" if vendor is OpenAIProvider else ""
    provider = closing(
        vendor(
            name="p",
            model="m",
            base_url=server.base_url + path,
            api_key=SECRET_KEY,
            context_window=None,
            retry_policy=QUICK_RETRIES,
        )
    )
    with trio.fail_after(10), pytest.raises(ProviderError) as caught:
        await provider.complete(user_request(), recorder)
    assert cause_of(caught.value).startswith(named)
    assert SECRET_KEY not in caught.value.reason
    assert len(server.requests) == 1
