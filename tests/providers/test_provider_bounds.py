"""Bounded waits and failures that explain (issue 14, PROTOCOL §10.2/§10.3): the endpoint and
cause in every reason, the SDK's own clocks and retries off, our retries inside the idle window.
"""

from __future__ import annotations

import errno
import itertools
import socket

import pytest
import trio

from robotad.agent.provider import ProviderError, idle_timeout_reason
from robotad.agent.stream_tap import StreamTap
from robotad.providers.anthropic import AnthropicProvider
from robotad.providers.failures import ProviderFailure, connection_failure, endpoint_of
from robotad.providers.openai import OpenAIProvider
from robotad.providers.retry import RetryPolicy, StreamProgress, call_with_retries
from robotad.providers.scripted import ScriptedProvider

from .conftest import (
    NO_RETRIES,
    QUICK_RETRIES,
    ProviderCloser,
    Recorder,
    Serve,
    cause_of,
    fake_served,
    refused_port,
    user_request,
)
from .fake_servers import Reply, anthropic_stream, openai_stream, sse


@pytest.mark.parametrize(
    ("url", "endpoint"),
    [
        ("http://127.0.0.1:11434/v1", "127.0.0.1:11434"),
        ("https://api.openai.com/v1", "api.openai.com:443"),
        ("http://localhost/v1", "localhost:80"),
        ("http://[::1]:8080", "[::1]:8080"),
    ],
)
def test_the_endpoint_is_host_and_port(url: str, endpoint: str) -> None:
    assert endpoint_of(url) == endpoint


def _chained(*links: BaseException) -> BaseException:
    """`links[0]` raised from `links[1]` raised from …, as an HTTP stack chains them."""
    for outer, inner in itertools.pairwise(links):
        outer.__cause__ = inner
    return links[0]


def test_a_connection_failure_names_its_cause_not_a_class() -> None:
    refused = ConnectionRefusedError(errno.ECONNREFUSED, "Connection refused sk-SECRET")
    group = ExceptionGroup("all attempts failed", [refused])
    chain = _chained(RuntimeError("Connection error."), OSError("all attempts"), group)
    assert connection_failure(chain).reason == "connection refused"
    reset = _chained(RuntimeError("x"), ConnectionResetError(errno.ECONNRESET, "reset"))
    assert connection_failure(reset).reason == "connection reset by peer"
    lookup = _chained(RuntimeError("x"), socket.gaierror(-2, "Name or service not known"))
    assert connection_failure(lookup).reason == "cannot resolve the host name"
    assert connection_failure(RuntimeError("no errno")).reason == "connection failed (RuntimeError)"


@pytest.mark.parametrize("vendor", [OpenAIProvider, AnthropicProvider])
async def test_the_sdk_bounds_only_connecting_and_never_retries(
    vendor: type[OpenAIProvider] | type[AnthropicProvider], closing: ProviderCloser
) -> None:
    """One owner per wait: the SDK gets `connect_timeout` and no read, write or pool clock
    (the loop's idle deadline is the wait for data) and ``max_retries=0`` (ours retry)."""
    provider = closing(
        vendor(
            name="p",
            model="m",
            base_url="http://127.0.0.1:1/v1",
            api_key=None,
            context_window=None,
            connect_timeout=3.5,
            idle_timeout=42.0,
        )
    )
    timeout = provider._client.timeout
    assert not isinstance(timeout, float)
    assert (timeout.connect, timeout.read, timeout.write, timeout.pool) == (3.5, None, None, None)
    assert provider._client.max_retries == 0
    assert (provider.endpoint, provider.idle_timeout) == ("127.0.0.1:1", 42.0)


@pytest.mark.parametrize("vendor", [OpenAIProvider, AnthropicProvider])
@pytest.mark.parametrize("budget", [0, -1])
def test_a_reply_budget_must_be_positive(
    vendor: type[OpenAIProvider] | type[AnthropicProvider], budget: int
) -> None:
    with pytest.raises(ValueError, match="max_tokens must be a positive integer"):
        vendor(
            name="p",
            model="m",
            base_url="http://127.0.0.1:1/v1",
            api_key="k",
            context_window=None,
            max_tokens=budget,
        )


async def test_a_refused_connection_names_the_endpoint_after_our_retries(
    closing: ProviderCloser, recorder: Recorder
) -> None:
    port = await refused_port()
    provider = closing(
        OpenAIProvider(
            name="oa",
            model="m",
            base_url=f"http://127.0.0.1:{port}/v1",
            api_key=None,
            context_window=None,
            retry_policy=RetryPolicy(max_retries=2, base_delay=0.001, max_delay=0.002),
        )
    )
    with trio.fail_after(10), pytest.raises(ProviderError) as caught:
        await provider.complete(user_request(), recorder)
    assert caught.value.reason == (
        f"127.0.0.1:{port}: connection refused (gave up after 3 attempts)"
    )


@pytest.mark.parametrize("vendor", [OpenAIProvider, AnthropicProvider])
async def test_a_connection_reset_mid_stream_names_its_cause_and_is_retried(
    vendor: type[OpenAIProvider] | type[AnthropicProvider],
    serve: Serve,
    closing: ProviderCloser,
    recorder: Recorder,
) -> None:
    """A reset after the stream began, before any text: the same retryable connection failure
    naming its cause for both vendors (the Anthropic SDK lets it out unwrapped)."""
    if vendor is OpenAIProvider:
        events, path = openai_stream(["fine"]), "/v1"
    else:
        events, path = anthropic_stream([{"text": ["fine"]}]), ""
    reset = Reply(events=events, reset_after=1)
    server = await serve(reset, reset, Reply(events=events))

    def make(policy: RetryPolicy) -> OpenAIProvider | AnthropicProvider:
        return closing(fake_served(vendor, server.base_url + path, policy))

    with trio.fail_after(10), pytest.raises(ProviderError) as caught:
        await make(NO_RETRIES).complete(user_request(), recorder)
    assert cause_of(caught.value) == "connection reset by peer"
    assert caught.value.retryable is True
    with trio.fail_after(10):
        reply = await make(QUICK_RETRIES).complete(user_request(), recorder)
    assert reply.text == "fine"
    assert len(server.requests) == 3  # the failed call, then a reset and its retry


def _endless_blocks(kind: str) -> tuple[str, list[bytes]]:
    """A stream whose 40 tool calls (or thinking blocks) each bring 64 Ki characters in what is
    not a text delta — a call's starting input, a thinking block's start, a call's id — far
    past `MAX_REPLY_CHARS` all together; the server then stalls."""
    big = "x" * 65_536
    if kind == "openai call ids":
        calls = [[{"index": i, "id": f"{big}{i}", "type": "function"}] for i in range(40)]
        return "/v1", openai_stream(tool_deltas=calls, finish_reason="tool_calls")
    blocks: list[dict[str, object]] = [
        {"type": "tool_use", "id": f"t{i}", "name": "Read", "input": {"path": big}}
        if kind == "anthropic tool inputs"
        else {"type": "thinking", "thinking": big, "signature": ""}
        for i in range(40)
    ]
    events = anthropic_stream([])[:2]  # message_start, ping
    events += [
        sse(
            {"type": "content_block_start", "index": i, "content_block": block},
            "content_block_start",
        )
        for i, block in enumerate(blocks)
    ]
    return "", events


@pytest.mark.parametrize("kind", ["anthropic tool inputs", "anthropic thinking", "openai call ids"])
async def test_what_a_reply_keeps_besides_text_counts_against_its_bound(
    kind: str, serve: Serve, closing: ProviderCloser
) -> None:
    """Every character a reply keeps counts against `MAX_REPLY_CHARS`, not only text deltas
    and argument pieces: a stream of blocks or calls that carry their content at their start
    (or in an id) is stopped at the bound, not kept growing while each event moves the idle
    deadline."""
    path, events = _endless_blocks(kind)
    server = await serve(Reply(events=events, stall_after=len(events)))
    vendor = OpenAIProvider if kind.startswith("openai") else AnthropicProvider
    provider = closing(fake_served(vendor, server.base_url + path))
    with (
        trio.fail_after(10),
        pytest.raises(ProviderError) as caught,
        trio.CancelScope() as idle,
    ):
        await provider.complete(user_request(), StreamTap(idle, 2.0))
    assert cause_of(caught.value).startswith("the reply passed 2 Mi characters without ending")


async def test_no_retry_starts_past_the_budget(autojump_clock: trio.abc.Clock) -> None:
    """Retry-After asks for 50 s, the budget is 30 s: we give up at once with the real cause
    instead of sleeping through the caller's idle window."""
    calls = 0

    async def attempt() -> str:
        nonlocal calls
        calls += 1
        raise ProviderFailure("HTTP 429: rate limited", retryable=True, retry_after=50.0)

    policy = RetryPolicy(max_retries=5, retry_after_cap=60.0)
    start = trio.current_time()
    with pytest.raises(ProviderError) as caught:
        await call_with_retries(
            attempt, policy, progress=StreamProgress(Recorder()), provider="p", budget=30.0
        )
    assert calls == 1
    # The real cause, and what the server asked for that did not fit.
    assert caught.value.reason == "HTTP 429: rate limited (the server asks to wait 50 s)"
    assert trio.current_time() == start
    calls = 0
    with pytest.raises(ProviderError):
        await call_with_retries(
            attempt, policy, progress=StreamProgress(Recorder()), provider="p", budget=120.0
        )
    assert calls == 3  # 50 s, 50 s fit in 120 s; a third wait would not


def test_the_idle_reason_names_the_endpoint_when_there_is_one() -> None:
    class Remote(ScriptedProvider):
        endpoint = "127.0.0.1:8080"

    assert idle_timeout_reason(Remote(), 120, replying=False) == (
        "127.0.0.1:8080: no data for 120 s (idle timeout): no reply began"
    )
    assert idle_timeout_reason(ScriptedProvider(), 0.5, replying=True) == (
        "no data for 0.5 s (idle timeout): the reply stopped mid-stream"
    )
