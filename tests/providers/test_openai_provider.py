"""The OpenAI provider against a loopback server speaking the real Chat Completions stream."""

from __future__ import annotations

from collections.abc import Callable

import httpx2
import openai
import pytest
import trio

from protocol.shapes import Message, ToolCall, Usage
from robotad.agent.provider import ModelRequest, NamedTool, ProviderError, ToolSchema
from robotad.providers.openai import OpenAIProvider
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
from .fake_servers import Reply, openai_chunk, openai_error, openai_stream, sse

USAGE = {"prompt_tokens": 31, "completion_tokens": 7, "total_tokens": 38}

MakeProvider = Callable[..., OpenAIProvider]


@pytest.fixture
def make_provider(closing: ProviderCloser) -> MakeProvider:
    def make(
        base_url: str, *, policy: RetryPolicy = QUICK_RETRIES, api_key: str | None = "sk-test"
    ) -> OpenAIProvider:
        return closing(
            OpenAIProvider(
                name="oa",
                model="gpt-4o-mini",
                base_url=base_url,
                api_key=api_key,
                context_window=None,
                retry_policy=policy,
            )
        )

    return make


def _call_delta(index: int, *, call_id: str = "", name: str = "", args: str = "") -> dict:
    function: dict[str, str] = {"arguments": args}
    if name:
        function["name"] = name
    delta: dict = {"index": index, "function": function}
    if call_id:
        delta |= {"id": call_id, "type": "function"}
    return delta


@pytest.mark.parametrize("framing", ["chunked", "close"])
@pytest.mark.parametrize("coalesce", [True, False])
async def test_text_streams_in_order_with_usage(
    serve: Serve, make_provider: MakeProvider, recorder: Recorder, framing: str, coalesce: bool
) -> None:
    events = openai_stream(["Hel", "lo, ", "wor", "ld"], usage=USAGE)
    server = await serve(Reply(events=events, framing=framing, coalesce=coalesce))
    provider = make_provider(server.base_url + "/v1")
    with trio.fail_after(10):
        reply = await provider.complete(user_request("greet"), recorder)
    assert recorder.texts == ["Hel", "lo, ", "wor", "ld"]
    assert reply.text == "Hello, world"
    assert reply.tool_calls == []
    assert reply.stop_reason == "stop"
    assert reply.usage == Usage(31, 7, 38)
    # role chunk, finish chunk and usage chunk are activity, not text
    assert recorder.activity == 3
    assert reply.raw is not None
    assert reply.raw["choices"][0]["message"] == {"role": "assistant", "content": "Hello, world"}
    assert reply.raw["usage"] == USAGE
    [request] = server.requests
    assert request.method == "POST"
    assert request.path == "/v1/chat/completions"
    assert request.headers["authorization"] == "Bearer sk-test"
    body = request.body
    assert body["model"] == "gpt-4o-mini"
    assert body["stream"] is True
    assert body["stream_options"] == {"include_usage": True}
    assert body["messages"] == [{"role": "user", "content": "greet"}]
    assert "tools" not in body
    assert "tool_choice" not in body


async def test_empty_chunks_are_no_sign_of_life_but_thinking_is(
    serve: Serve, make_provider: MakeProvider, recorder: Recorder
) -> None:
    """A keep-alive of empty deltas must not hold the idle timeout off forever (Anthropic's
    pings do not either); a reasoning model's thinking (``reasoning_content``, a member the
    SDK does not name) is activity, as are the role, the finish and usage. A role repeated
    is no news: a server that sent role-only chunks forever kept a turn alive until abort."""
    events = [
        openai_chunk({"role": "assistant", "content": ""}),
        *[openai_chunk({}) for _ in range(5)],
        *[openai_chunk({"role": "assistant"}) for _ in range(5)],
        *[openai_chunk({"reasoning_content": "hmm"}) for _ in range(2)],
        openai_chunk({"content": "ok"}),
        openai_chunk({}, finish_reason="stop"),
    ]
    server = await serve(Reply(events=events))
    with trio.fail_after(10):
        reply = await make_provider(server.base_url).complete(user_request(), recorder)
    assert reply.text == "ok"
    assert recorder.activity == 1 + 2 + 1  # role, thinking twice, finish


async def test_a_configured_max_tokens_bounds_every_request(
    serve: Serve, closing: ProviderCloser, recorder: Recorder
) -> None:
    """A local server gets ``max_tokens`` (what llama.cpp, Ollama and vLLM read); without a
    budget the body carries none and the server's own default applies."""
    bodies = []
    for budget in (64, None):
        server = await serve(Reply(events=openai_stream(["ok"], usage=USAGE)))
        provider = OpenAIProvider(
            name="local",
            model="smollm2",
            base_url=server.base_url + "/v1",
            api_key=None,
            context_window=None,
            max_tokens=budget,
            retry_policy=NO_RETRIES,
        )
        with trio.fail_after(10):
            await closing(provider).complete(user_request("greet"), recorder)
        bodies.append(server.requests[0].body)
    bounded, unbounded = bodies
    assert bounded["max_tokens"] == 64
    assert "max_completion_tokens" not in bounded
    assert "max_tokens" not in unbounded
    assert "max_completion_tokens" not in unbounded


@pytest.mark.parametrize(
    "base_url", [None, "https://api.openai.com/v1", "https://api.openai.com/v1/"]
)
async def test_openai_itself_gets_the_budget_as_max_completion_tokens(
    closing: ProviderCloser, base_url: str | None
) -> None:
    """OpenAI's endpoint refuses ``max_tokens`` for its reasoning models; the request is only
    built here, never sent."""
    provider = closing(
        OpenAIProvider(
            name="oa",
            model="gpt-4o-mini",
            base_url=base_url,
            api_key="sk-test",
            context_window=None,
            max_tokens=500,
        )
    )
    params = provider.request_params(user_request("greet"))
    assert params["max_completion_tokens"] == 500
    assert "max_tokens" not in params


async def test_parallel_tool_calls_assembled_by_index(
    serve: Serve, make_provider: MakeProvider, recorder: Recorder
) -> None:
    tool_deltas = [
        [_call_delta(0, call_id="call_a", name="Read", args="")],
        [_call_delta(0, args='{"pa'), _call_delta(1, call_id="call_b", name="Glob", args='{"pat')],
        [_call_delta(0, args='th": "a.txt"}')],
        [_call_delta(1, args='tern": "*.py", "n": [1, 2]}')],
        [_call_delta(2, call_id="call_c", name="Bash", args='{"command": "ls')],
    ]
    events = openai_stream(["Let me look."], tool_deltas=tool_deltas, finish_reason="tool_calls")
    server = await serve(Reply(events=events))
    provider = make_provider(server.base_url)
    with trio.fail_after(10):
        reply = await provider.complete(user_request(), recorder)
    assert reply.text == "Let me look."
    assert reply.stop_reason == "tool_calls"
    assert reply.tool_calls == [
        ToolCall("call_a", "Read", {"path": "a.txt"}),
        ToolCall("call_b", "Glob", {"pattern": "*.py", "n": [1, 2]}),
        ToolCall("call_c", "Bash", {}, raw_arguments='{"command": "ls'),
    ]
    assert reply.usage is None
    assert reply.raw is not None
    raw_calls = reply.raw["choices"][0]["message"]["tool_calls"]
    assert [c["function"]["arguments"] for c in raw_calls] == [
        '{"path": "a.txt"}',
        '{"pattern": "*.py", "n": [1, 2]}',
        '{"command": "ls',
    ]


async def test_arguments_that_are_json_but_not_an_object_are_kept_raw(
    serve: Serve, make_provider: MakeProvider, recorder: Recorder
) -> None:
    tool_deltas = [[_call_delta(0, call_id="call_x", name="Read", args="[1, 2]")]]
    events = openai_stream(tool_deltas=tool_deltas, finish_reason="tool_calls")
    server = await serve(Reply(events=events))
    with trio.fail_after(10):
        reply = await make_provider(server.base_url).complete(user_request(), recorder)
    assert reply.tool_calls == [ToolCall("call_x", "Read", {}, raw_arguments="[1, 2]")]


@pytest.mark.parametrize(
    ("choice", "wire"),
    [
        ("auto", "auto"),
        ("none", "none"),
        ("required", "required"),
        (NamedTool("Read"), {"type": "function", "function": {"name": "Read"}}),
    ],
)
async def test_tools_and_tool_choice_on_the_wire(
    serve: Serve, make_provider: MakeProvider, recorder: Recorder, choice: object, wire: object
) -> None:
    server = await serve(Reply(events=openai_stream(["ok"])))
    schema = {"type": "object", "properties": {"path": {"type": "string"}}}
    request = ModelRequest(
        messages=[Message.system("be brief"), Message.user("read it")],
        tools=[ToolSchema("Read", "Read a file", schema)],
        tool_choice=choice,  # type: ignore[arg-type]
        effort="low",
    )
    with trio.fail_after(10):
        await make_provider(server.base_url).complete(request, recorder)
    body = server.requests[0].body
    assert body["tools"] == [
        {
            "type": "function",
            "function": {"name": "Read", "description": "Read a file", "parameters": schema},
        }
    ]
    assert body["tool_choice"] == wire
    assert body["reasoning_effort"] == "low"
    assert body["messages"][0] == {"role": "system", "content": "be brief"}


async def test_401_fails_at_once(
    serve: Serve, make_provider: MakeProvider, recorder: Recorder
) -> None:
    server = await serve(openai_error(401, "Incorrect API key provided", "invalid_api_key"))
    await checks.check_401_fails_at_once(server, make_provider(server.base_url), recorder)


async def test_429_then_success_is_retried_with_retry_after_capped(
    serve: Serve, make_provider: MakeProvider, recorder: Recorder
) -> None:
    limited = openai_error(429, "slow down", "rate_limit_exceeded")
    # An hour-long Retry-After: only the policy's cap (10 ms) lets this finish in time.
    limited.headers.append(("Retry-After", "3600"))
    server = await serve(limited, Reply(events=openai_stream(["fine"])))
    await checks.check_retried_then_fine(server, make_provider(server.base_url), recorder)
    assert server.requests[1].headers["x-stainless-retry-count"] == "0"


async def test_500_repeatedly_gives_up_after_max_retries(
    serve: Serve, make_provider: MakeProvider, recorder: Recorder
) -> None:
    server = await serve(openai_error(500, "boom", "server_error"))
    cause = "HTTP 500: server error: boom (gave up after 3 attempts)"
    await checks.check_gives_up_after_max_retries(
        server, make_provider(server.base_url), recorder, 500, cause
    )


async def test_a_turn_whose_idle_window_is_short_sees_the_real_failure(
    serve: Serve, make_provider: MakeProvider, recorder: Recorder
) -> None:
    """The session's idle window (here 1.5 s, an enclosing deadline) is shorter than the
    provider's: quick failures are retried within it, and the 500 is the answer, never an
    idle timeout after a wait that outlasted the window."""
    server = await serve(openai_error(500, "boom", "server_error"))
    policy = RetryPolicy(max_retries=5, base_delay=0.4, max_delay=0.4)
    with trio.move_on_after(1.5) as idle, pytest.raises(ProviderError) as caught:
        await make_provider(server.base_url, policy=policy).complete(user_request(), recorder)
    assert not idle.cancelled_caught
    assert 2 <= len(server.requests) <= 6  # retried within the window
    assert cause_of(caught.value).startswith("HTTP 500: server error: boom (gave up after ")


async def test_400_is_not_retried_and_keeps_the_server_message(
    serve: Serve, make_provider: MakeProvider, recorder: Recorder
) -> None:
    server = await serve(openai_error(400, "maximum context length is 128000 tokens"))
    error = await checks.failure_of(make_provider(server.base_url), recorder)
    assert cause_of(error) == "HTTP 400: request rejected: maximum context length is 128000 tokens"
    assert error.retryable is False
    assert len(server.requests) == 1


async def test_connection_refused_is_a_retryable_connection_failure(
    make_provider: MakeProvider, recorder: Recorder
) -> None:
    error = await checks.connection_refused_failure(
        lambda url: make_provider(url, policy=NO_RETRIES), "/v1", recorder
    )
    assert error.status is None


async def test_stream_cut_before_finish_is_a_failure(
    serve: Serve, make_provider: MakeProvider, recorder: Recorder
) -> None:
    events = [openai_chunk({"role": "assistant", "content": ""}), openai_chunk({"content": "par"})]
    server = await serve(Reply(events=events, framing="close"))
    error = await checks.failure_of(make_provider(server.base_url), recorder)
    assert cause_of(error) == "stream ended before the reply was complete"
    # Text had been shown, so the retryable failure was not retried.
    assert recorder.texts == ["par"]
    assert len(server.requests) == 1


@pytest.mark.parametrize("usage", [{"prompt_tokens": 7, "completion_tokens": 2}, None])
@pytest.mark.parametrize("then", ["held open", "reset"])
async def test_the_reply_is_whole_at_its_finish_without_done(
    serve: Serve,
    make_provider: MakeProvider,
    recorder: Recorder,
    usage: dict[str, int] | None,
    then: str,
) -> None:
    """A server that finishes the reply (and sends usage, or ignores ``include_usage``) but
    never sends ``[DONE]``, holding the response open or resetting the connection, neither
    fails a reply already shown whole nor keeps the call waiting for the caller's idle
    deadline."""
    events = openai_stream(["whole"], usage=usage, done=False)
    cut = {"stall_after": len(events)} if then == "held open" else {"reset_after": len(events)}
    server = await serve(Reply(events=events, **cut))  # type: ignore[arg-type]
    with trio.fail_after(5):
        reply = await make_provider(server.base_url, policy=NO_RETRIES).complete(
            user_request(), recorder
        )
    assert (reply.text, reply.stop_reason) == ("whole", "stop")
    assert recorder.texts == ["whole"]
    if usage is not None:
        assert reply.usage == Usage(7, 2)


async def test_a_web_page_where_the_api_should_be_is_named_and_not_retried(
    serve: Serve, make_provider: MakeProvider, recorder: Recorder
) -> None:
    """A wrong base_url often answers 200 with a web page: said so, once (a retry would get
    the same page), instead of "a stream that ended before the reply"."""
    page = Reply(body=b"<html><body>Welcome</body></html>", content_type="text/html; charset=utf-8")
    server = await serve(page, page, page)
    error = await checks.web_page_failure(server, make_provider(server.base_url), recorder)
    assert cause_of(error) == (
        "the server answered with text/html, not an event stream: does base_url name the "
        "model API (an OpenAI-compatible one usually ends in /v1)?"
    )
    assert error.retryable is False


async def test_an_event_that_is_not_json_is_named(
    serve: Serve, make_provider: MakeProvider, recorder: Recorder
) -> None:
    events = [openai_chunk({"role": "assistant", "content": ""}), sse("{not json")]
    server = await serve(Reply(events=events))
    error = await checks.failure_of(make_provider(server.base_url), recorder)
    assert cause_of(error) == (
        "the server sent an event whose data is not JSON (Expecting property name enclosed in "
        "double quotes at line 1, column 2)"
    )
    assert len(server.requests) == 1


async def test_stream_cut_before_any_text_is_retried(
    serve: Serve, make_provider: MakeProvider, recorder: Recorder
) -> None:
    cut = Reply(events=[openai_chunk({"role": "assistant", "content": ""})], framing="close")
    server = await serve(cut, Reply(events=openai_stream(["whole"])))
    with trio.fail_after(10):
        reply = await make_provider(server.base_url).complete(user_request(), recorder)
    assert reply.text == "whole"
    assert recorder.texts == ["whole"]
    assert len(server.requests) == 2


async def test_error_payload_inside_the_stream(
    serve: Serve, make_provider: MakeProvider, recorder: Recorder
) -> None:
    events = [
        openai_chunk({"content": "half"}),
        sse({"error": {"message": "model overloaded", "type": "server_error"}}),
    ]
    server = await serve(Reply(events=events))
    error = await checks.failure_of(make_provider(server.base_url), recorder)
    assert cause_of(error) == "stream error reported by the server: model overloaded"
    assert len(server.requests) == 1


async def test_cancellation_closes_the_http_stream(
    serve: Serve, make_provider: MakeProvider, recorder: Recorder
) -> None:
    events = openai_stream(["first", "second", "never"])
    server = await serve(
        Reply(events=events, stall_after=3), Reply(events=openai_stream(["again"]))
    )
    provider = make_provider(server.base_url)
    await checks.check_cancellation_closes_the_http_stream(server, provider, recorder)
    assert recorder.texts == ["first", "second"]


async def test_a_stalled_stream_is_left_to_the_caller_deadline(
    serve: Serve, make_provider: MakeProvider, recorder: Recorder
) -> None:
    """The provider has no idle timeout of its own; the loop's trio deadline ends the call."""
    server = await serve(Reply(events=openai_stream(["tick"]), stall_after=2))
    await checks.check_stalled_stream_is_left_to_the_caller_deadline(
        server, make_provider(server.base_url), recorder
    )


async def test_aclose_is_idempotent_and_ends_the_provider(
    serve: Serve, make_provider: MakeProvider, recorder: Recorder
) -> None:
    server = await serve(Reply(events=openai_stream(["x"])))
    provider = make_provider(server.base_url)
    await provider.aclose()
    await provider.aclose()
    with pytest.raises(ProviderError, match="closed"):
        await provider.complete(user_request(), recorder)
    assert server.requests == []


async def test_no_key_sends_a_placeholder_not_the_environment(
    serve: Serve,
    make_provider: MakeProvider,
    recorder: Recorder,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-the-environment")
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/nowhere")
    server = await serve(Reply(events=openai_stream(["ok"])))
    await checks.check_no_key_sends_a_placeholder(
        server, make_provider(server.base_url, api_key=None), recorder
    )


async def test_a_callers_http_client_is_used_and_closed_with_the_provider(
    serve: Serve, recorder: Recorder
) -> None:
    server = await serve(Reply(events=openai_stream(["via own client"])))
    client = httpx2.AsyncClient(headers={"x-robota-probe": "1"})
    provider = OpenAIProvider(
        name="oa",
        model="gpt-4o",
        base_url=server.base_url,
        api_key="sk-test",
        context_window=None,
        max_retries=0,
        http_client=client,
    )
    with trio.fail_after(10):
        reply = await provider.complete(user_request(), recorder)
    assert reply.text == "via own client"
    assert server.requests[0].headers["x-robota-probe"] == "1"
    await provider.aclose()
    assert client.is_closed


async def test_max_retries_zero_makes_one_attempt(serve: Serve, recorder: Recorder) -> None:
    server = await serve(openai_error(503, "busy", "server_error"))
    provider = OpenAIProvider(
        name="oa",
        model="gpt-4o",
        base_url=server.base_url,
        api_key="k",
        context_window=None,
        max_retries=0,
    )
    try:
        with trio.fail_after(10), pytest.raises(ProviderError) as caught:
            await provider.complete(user_request(), recorder)
    finally:
        await provider.aclose()
    assert cause_of(caught.value) == "HTTP 503: server error: busy"
    assert len(server.requests) == 1


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"connect_timeout": 0.0}, "connect_timeout"),
        ({"idle_timeout": -1.0}, "idle_timeout"),
        ({"max_retries": -1}, "max_retries"),
        ({"context_window": 0}, "context window"),
    ],
)
def test_nonsense_settings_are_refused(kwargs: dict[str, object], match: str) -> None:
    settings: dict[str, object] = {
        "name": "oa",
        "model": "gpt-4o",
        "base_url": None,
        "api_key": "k",
        "context_window": None,
    }
    with pytest.raises(ValueError, match=match):
        OpenAIProvider(**(settings | kwargs))  # type: ignore[arg-type]


async def test_the_sdk_gets_only_the_stream_switches_and_the_body_goes_out_whole(
    serve: Serve, make_provider: MakeProvider, recorder: Recorder, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Messages and tools are wire-ready JSON: they travel as ``extra_body``, so the SDK's
    per-call walk over its TypedDicts never sees them, and the server gets them unchanged."""
    from openai.resources.chat.completions import completions as sdk_module

    walked: list[dict[str, object]] = []
    real = sdk_module.async_maybe_transform

    async def spy(data: object, *args: object, **kwargs: object) -> object:
        if isinstance(data, dict) and "model" in data:
            walked.append(data)
        return await real(data, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(sdk_module, "async_maybe_transform", spy)
    server = await serve(Reply(events=openai_stream(["ok"])))
    schema = {"type": "object", "properties": {"path": {"type": "string"}}}
    request = ModelRequest(
        messages=[Message.system("be brief"), Message.user("read it")],
        tools=[ToolSchema("Read", "Read a file", schema)],
    )
    with trio.fail_after(10):
        await make_provider(server.base_url).complete(request, recorder)
    [sdk_params] = walked
    given = {
        name
        for name, value in sdk_params.items()
        if value is not None and not isinstance(value, (openai.Omit, openai.NotGiven))
    }
    assert given == {"model", "messages", "stream", "stream_options"}
    assert sdk_params["messages"] == []
    body = server.requests[0].body
    assert body["messages"] == [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "read it"},
    ]
    assert body["tools"][0]["function"]["parameters"] == schema
    assert body["model"] == "gpt-4o-mini"
    assert body["stream"] is True


async def test_a_negative_token_count_is_ignored_and_logged(
    serve: Serve, make_provider: MakeProvider, recorder: Recorder, caplog: pytest.LogCaptureFixture
) -> None:
    """No call uses a negative number of tokens: such a usage would show a negative
    ``usedTokens``, so the reply carries none and robotad's log says why."""
    usage = {"prompt_tokens": -500, "completion_tokens": 7, "total_tokens": -493}
    server = await serve(Reply(events=openai_stream(["ok"], usage=usage)))
    with trio.fail_after(10):
        reply = await make_provider(server.base_url + "/v1").complete(user_request(), recorder)
    assert reply.text == "ok"
    assert reply.usage is None
    assert "openai reported a token count no call can have" in caplog.text
