"""The Anthropic provider against a loopback server speaking the real Messages event stream."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import trio

from protocol.shapes import Message, ToolCall, Usage
from robotad.agent.provider import ModelRequest, NamedTool, ToolSchema
from robotad.providers.anthropic import AnthropicProvider
from robotad.providers.retry import RetryPolicy

from . import provider_checks as checks
from .conftest import (
    NO_RETRIES,
    QUICK_RETRIES,
    ProviderCloser,
    Recorder,
    Serve,
    cause_of,
    user_request,
)
from .fake_servers import Reply, anthropic_error, anthropic_stream, sse

MakeProvider = Callable[..., AnthropicProvider]


@pytest.fixture
def make_provider(closing: ProviderCloser) -> MakeProvider:
    def make(
        base_url: str,
        *,
        policy: RetryPolicy = QUICK_RETRIES,
        api_key: str | None = "sk-ant-test",
        max_tokens: int = 8192,
    ) -> AnthropicProvider:
        return closing(
            AnthropicProvider(
                name="claude",
                model="claude-fake-1",
                base_url=base_url,
                api_key=api_key,
                context_window=None,
                max_tokens=max_tokens,
                retry_policy=policy,
            )
        )

    return make


@pytest.mark.parametrize("framing", ["chunked", "close"])
@pytest.mark.parametrize("coalesce", [True, False])
async def test_text_streams_in_order_with_usage(
    serve: Serve, make_provider: MakeProvider, recorder: Recorder, framing: str, coalesce: bool
) -> None:
    events = anthropic_stream(
        [{"text": ["Hel", "lo, ", "world"]}], input_tokens=40, output_tokens=9
    )
    server = await serve(Reply(events=events, framing=framing, coalesce=coalesce))
    provider = make_provider(server.base_url)
    assert provider.context_window == 200_000
    with trio.fail_after(10):
        reply = await provider.complete(user_request("greet"), recorder)
    assert recorder.texts == ["Hel", "lo, ", "world"]
    assert reply.text == "Hello, world"
    assert reply.tool_calls == []
    assert reply.stop_reason == "end_turn"
    assert reply.usage == Usage(40, 9)
    # message_start, block start, block stop, message_delta, message_stop (ping is dropped)
    assert recorder.activity == 5
    assert reply.raw is not None
    assert reply.raw["content"] == [{"type": "text", "text": "Hello, world"}]
    assert reply.raw["id"] == "msg_fake"
    [request] = server.requests
    assert request.path == "/v1/messages"
    assert request.headers["authorization"] == "Bearer sk-ant-test"
    assert "anthropic-version" in request.headers
    body = request.body
    assert body["model"] == "claude-fake-1"
    assert body["max_tokens"] == 8192
    assert body["stream"] is True
    assert body["messages"] == [{"role": "user", "content": [{"type": "text", "text": "greet"}]}]
    assert "system" not in body
    assert "tools" not in body


async def test_tool_use_blocks_become_tool_calls(
    serve: Serve, make_provider: MakeProvider, recorder: Recorder
) -> None:
    blocks = [
        {"text": ["Checking."]},
        {"tool_use": ("toolu_1", "Read", ['{"pa', 'th": ', '"a.txt"}'])},
        {"tool_use": ("toolu_2", "Glob", ['{"pattern": "*.py"}'])},
        {"tool_use": ("toolu_3", "Bash", ['{"command": '])},
        {"tool_use": ("toolu_4", "Status", [])},
    ]
    events = anthropic_stream(blocks, stop_reason="tool_use")
    server = await serve(Reply(events=events))
    with trio.fail_after(10):
        reply = await make_provider(server.base_url).complete(user_request(), recorder)
    assert reply.text == "Checking."
    assert reply.stop_reason == "tool_use"
    assert reply.tool_calls == [
        ToolCall("toolu_1", "Read", {"path": "a.txt"}),
        ToolCall("toolu_2", "Glob", {"pattern": "*.py"}),
        ToolCall("toolu_3", "Bash", {}, raw_arguments='{"command": '),
        ToolCall("toolu_4", "Status", {}),
    ]
    assert reply.raw is not None
    raw_blocks = reply.raw["content"]
    assert raw_blocks[1] == {
        "type": "tool_use",
        "id": "toolu_1",
        "name": "Read",
        "input": {"path": "a.txt"},
    }
    assert raw_blocks[3]["partial_json"] == '{"command": '


async def test_history_system_and_tools_on_the_wire(
    serve: Serve, make_provider: MakeProvider, recorder: Recorder
) -> None:
    server = await serve(Reply(events=anthropic_stream([{"text": ["ok"]}])))
    call = ToolCall("toolu_1", "Read", {"path": "a"})
    schema = {"type": "object", "properties": {"path": {"type": "string"}}}
    request = ModelRequest(
        messages=[
            Message.system("be brief"),
            Message.user("read a"),
            Message.assistant("reading", [call]),
            Message.tool("toolu_1", "Read", "contents", ok=False),
            Message.system("turn context"),
            Message.user("and?"),
        ],
        tools=[ToolSchema("Read", "Read a file", schema)],
        tool_choice="required",
        effort="high",
    )
    with trio.fail_after(10):
        await make_provider(server.base_url, max_tokens=1024).complete(request, recorder)
    body = server.requests[0].body
    assert body["system"] == "be brief\n\nturn context"
    assert body["max_tokens"] == 1024
    assert body["tools"] == [{"name": "Read", "description": "Read a file", "input_schema": schema}]
    assert body["tool_choice"] == {"type": "any"}
    assert body["output_config"] == {"effort": "high"}
    assert body["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "read a"}]},
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "reading"},
                {"type": "tool_use", "id": "toolu_1", "name": "Read", "input": {"path": "a"}},
            ],
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_1",
                    "content": "contents",
                    "is_error": True,
                },
                {"type": "text", "text": "and?"},
            ],
        },
    ]


@pytest.mark.parametrize(
    ("choice", "wire"),
    [
        ("auto", {"type": "auto"}),
        ("none", {"type": "none"}),
        ("required", {"type": "any"}),
        (NamedTool("Read"), {"type": "tool", "name": "Read"}),
    ],
)
async def test_tool_choice_on_the_wire(
    serve: Serve, make_provider: MakeProvider, recorder: Recorder, choice: object, wire: object
) -> None:
    server = await serve(Reply(events=anthropic_stream([{"text": ["ok"]}])))
    request = ModelRequest(
        messages=[Message.user("x")],
        tools=[ToolSchema("Read", "", {"type": "object"})],
        tool_choice=choice,  # type: ignore[arg-type]
    )
    with trio.fail_after(10):
        await make_provider(server.base_url).complete(request, recorder)
    assert server.requests[0].body["tool_choice"] == wire


async def test_401_fails_at_once(
    serve: Serve, make_provider: MakeProvider, recorder: Recorder
) -> None:
    server = await serve(anthropic_error(401, "invalid x-api-key", "authentication_error"))
    await checks.check_401_fails_at_once(server, make_provider(server.base_url), recorder)


async def test_429_then_success_is_retried_with_retry_after_capped(
    serve: Serve, make_provider: MakeProvider, recorder: Recorder
) -> None:
    limited = anthropic_error(429, "rate limited", "rate_limit_error")
    limited.headers.append(("retry-after", "3600"))
    server = await serve(limited, Reply(events=anthropic_stream([{"text": ["fine"]}])))
    await checks.check_retried_then_fine(server, make_provider(server.base_url), recorder)


async def test_overloaded_repeatedly_gives_up_after_max_retries(
    serve: Serve, make_provider: MakeProvider, recorder: Recorder
) -> None:
    server = await serve(anthropic_error(529, "Overloaded", "overloaded_error"))
    cause = "HTTP 529: server overloaded: Overloaded (gave up after 3 attempts)"
    await checks.check_gives_up_after_max_retries(
        server, make_provider(server.base_url), recorder, 529, cause
    )


async def test_connection_refused_is_a_retryable_connection_failure(
    make_provider: MakeProvider, recorder: Recorder
) -> None:
    await checks.connection_refused_failure(
        lambda url: make_provider(url, policy=NO_RETRIES), "", recorder
    )


async def test_error_event_before_text_is_retried(
    serve: Serve, make_provider: MakeProvider, recorder: Recorder
) -> None:
    overloaded = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
    broken = [*anthropic_stream([{"text": ["never"]}])[:2], sse(overloaded, "error")]
    server = await serve(Reply(events=broken), Reply(events=anthropic_stream([{"text": ["ok"]}])))
    with trio.fail_after(10):
        reply = await make_provider(server.base_url).complete(user_request(), recorder)
    assert reply.text == "ok"
    assert len(server.requests) == 2


async def test_error_event_after_text_is_not_retried(
    serve: Serve, make_provider: MakeProvider, recorder: Recorder
) -> None:
    overloaded = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
    broken = [*anthropic_stream([{"text": ["shown"]}])[:4], sse(overloaded, "error")]
    server = await serve(Reply(events=broken))
    error = await checks.failure_of(make_provider(server.base_url), recorder)
    assert cause_of(error) == "stream error reported by the server: Overloaded"
    assert error.retryable is True
    assert recorder.texts == ["shown"]
    assert len(server.requests) == 1


async def test_stream_without_message_stop_is_a_failure(
    serve: Serve, make_provider: MakeProvider, recorder: Recorder
) -> None:
    events = anthropic_stream([{"text": ["cut"]}], stop=False)
    server = await serve(Reply(events=events, framing="close"))
    error = await checks.failure_of(make_provider(server.base_url), recorder)
    assert cause_of(error) == "stream ended before the reply was complete"


@pytest.mark.parametrize("then", ["held open", "reset"])
async def test_the_reply_is_whole_at_message_stop_whatever_the_connection_does_next(
    serve: Serve, make_provider: MakeProvider, recorder: Recorder, then: str
) -> None:
    """``message_stop`` ends the reply: a server (or proxy) that then holds the response open,
    or resets the connection, neither fails a reply already shown whole nor keeps the call
    waiting until the caller's idle deadline."""
    events = anthropic_stream([{"text": ["whole"]}])
    cut = {"stall_after": len(events)} if then == "held open" else {"reset_after": len(events)}
    server = await serve(Reply(events=events, **cut))  # type: ignore[arg-type]
    with trio.fail_after(5):
        reply = await make_provider(server.base_url, policy=NO_RETRIES).complete(
            user_request(), recorder
        )
    assert reply.text == "whole"
    assert reply.stop_reason == "end_turn"
    assert recorder.texts == ["whole"]


async def test_cancellation_closes_the_http_stream(
    serve: Serve, make_provider: MakeProvider, recorder: Recorder
) -> None:
    events = anthropic_stream([{"text": ["first", "second", "never"]}])
    # message_start, ping, block start, two deltas — then silence
    server = await serve(
        Reply(events=events, stall_after=5), Reply(events=anthropic_stream([{"text": ["again"]}]))
    )
    provider = make_provider(server.base_url)
    await checks.check_cancellation_closes_the_http_stream(server, provider, recorder)
    assert recorder.texts[0] == "first"


async def test_a_stalled_stream_is_left_to_the_caller_deadline(
    serve: Serve, make_provider: MakeProvider, recorder: Recorder
) -> None:
    """The provider has no idle timeout of its own; the loop's trio deadline ends the call."""
    server = await serve(Reply(events=anthropic_stream([{"text": ["tick"]}]), stall_after=4))
    await checks.check_stalled_stream_is_left_to_the_caller_deadline(
        server, make_provider(server.base_url), recorder
    )


async def test_no_key_never_falls_back_to_the_environment(
    serve: Serve,
    make_provider: MakeProvider,
    recorder: Recorder,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-from-the-environment")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", "http://127.0.0.1:9")
    server = await serve(Reply(events=anthropic_stream([{"text": ["ok"]}])))
    await checks.check_no_key_sends_a_placeholder(
        server, make_provider(server.base_url, api_key=None), recorder
    )


async def test_a_web_page_where_the_api_should_be_is_named_and_not_retried(
    serve: Serve, make_provider: MakeProvider, recorder: Recorder
) -> None:
    page = Reply(body=b"<!doctype html><title>proxy</title>", content_type="text/html")
    server = await serve(page, page)
    await checks.web_page_failure(server, make_provider(server.base_url), recorder)


async def test_a_negative_token_count_is_ignored_and_logged(
    serve: Serve, make_provider: MakeProvider, recorder: Recorder, caplog: pytest.LogCaptureFixture
) -> None:
    """A negative count is no usage: the reply carries none, and robotad's log says why."""
    events = anthropic_stream([{"text": ["ok"]}], input_tokens=40, output_tokens=-9)
    server = await serve(Reply(events=events))
    with trio.fail_after(10):
        reply = await make_provider(server.base_url).complete(user_request(), recorder)
    assert reply.text == "ok"
    assert reply.usage is None
    assert "anthropic reported a token count no call can have" in caplog.text
