"""Checks both streaming providers (Anthropic, OpenAI) must pass the same way: each provider's
test module builds its own server replies and provider, and hands them to these."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import trio

from robotad.agent.provider import ModelRequest, Provider, ProviderError

from .conftest import Recorder, cancel_when_stalled, cause_of, refused_port, user_request
from .fake_servers import FakeModelServer


async def failure_of(
    provider: Provider, recorder: Recorder, request: ModelRequest | None = None
) -> ProviderError:
    """The `ProviderError` one call fails with (bounded at 10 s)."""
    with trio.fail_after(10), pytest.raises(ProviderError) as caught:
        await provider.complete(request or user_request(), recorder)
    return caught.value


async def check_401_fails_at_once(
    server: FakeModelServer, provider: Provider, recorder: Recorder
) -> None:
    error = await failure_of(provider, recorder)
    assert cause_of(error) == "HTTP 401: authentication failed"
    assert error.retryable is False
    assert error.status == 401
    assert len(server.requests) == 1


async def check_retried_then_fine(
    server: FakeModelServer, provider: Provider, recorder: Recorder
) -> None:
    """The first reply fails retryably, the second streams ``fine``."""
    with trio.fail_after(10):
        reply = await provider.complete(user_request(), recorder)
    assert reply.text == "fine"
    assert len(server.requests) == 2


async def check_gives_up_after_max_retries(
    server: FakeModelServer, provider: Provider, recorder: Recorder, status: int, cause: str
) -> None:
    error = await failure_of(provider, recorder)
    assert len(server.requests) == 3
    assert error.retryable is True
    assert error.status == status
    assert cause_of(error) == cause


async def connection_refused_failure(
    make: Callable[[str], Provider], path: str, recorder: Recorder
) -> ProviderError:
    """`make` a provider for a loopback port nothing listens on (``path`` after the port):
    its call is a retryable connection failure that names the endpoint."""
    port = await refused_port()
    error = await failure_of(make(f"http://127.0.0.1:{port}{path}"), recorder)
    assert error.reason == f"127.0.0.1:{port}: connection refused"
    assert error.retryable is True
    return error


async def check_cancellation_closes_the_http_stream(
    server: FakeModelServer, provider: Provider, recorder: Recorder
) -> None:
    """`server` stalls mid-stream, then answers ``again``: the cancelled call closes its
    connection and the provider is still usable (the pool was not poisoned)."""
    with trio.fail_after(10):
        await cancel_when_stalled(provider, server, recorder)
        again = await provider.complete(user_request(), Recorder())
    assert again.text == "again"


async def check_stalled_stream_is_left_to_the_caller_deadline(
    server: FakeModelServer, provider: Provider, recorder: Recorder
) -> None:
    """The provider has no idle timeout of its own; the loop's trio deadline ends the call.
    `server` streams ``tick`` then stalls."""
    with trio.fail_after(10):
        with trio.move_on_after(0.2) as idle:
            await provider.complete(user_request(), recorder)
        await server.peer_closed.wait()
    assert idle.cancelled_caught
    assert recorder.texts == ["tick"]


async def check_no_key_sends_a_placeholder(
    server: FakeModelServer, provider: Provider, recorder: Recorder
) -> None:
    """`provider` has no key while the SDK's environment variables name one (and another
    server): the request goes to `server`, with the placeholder key."""
    with trio.fail_after(10):
        await provider.complete(user_request(), recorder)
    assert server.requests[0].headers["authorization"] == "Bearer no-key"


async def web_page_failure(
    server: FakeModelServer, provider: Provider, recorder: Recorder
) -> ProviderError:
    """`server` answers with an HTML page: named, not retried; the caller checks the wording."""
    error = await failure_of(provider, recorder)
    assert cause_of(error).startswith(
        "the server answered with text/html, not an event stream: does base_url name the model API"
    )
    assert len(server.requests) == 1
    return error
