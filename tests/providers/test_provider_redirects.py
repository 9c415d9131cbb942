"""A model server's redirect is never followed: the key and the conversation stay with the
server `base_url` names. Against two loopback servers (127.0.0.1 and ``localhost``: two host
names, both this machine), and as a pure function for where a redirect leads."""

from __future__ import annotations

import pytest
import trio

from robotad.agent.provider import ProviderError
from robotad.providers.anthropic import AnthropicProvider
from robotad.providers.failures import redirect_target, status_failure
from robotad.providers.openai import OpenAIProvider

from .conftest import SECRET_KEY, ProviderCloser, Recorder, Serve, cause_of, user_request
from .fake_servers import Reply, anthropic_stream, openai_stream

VENDORS = pytest.mark.parametrize("vendor", [OpenAIProvider, AnthropicProvider])


@VENDORS
@pytest.mark.parametrize("status", [301, 307, 308])
async def test_a_redirect_to_another_host_is_not_followed_and_names_where_it_led(
    vendor: type[OpenAIProvider] | type[AnthropicProvider],
    status: int,
    serve: Serve,
    closing: ProviderCloser,
    recorder: Recorder,
) -> None:
    # G-206: the failure is a ProviderError whose reason holds no key; nothing reached the
    # other host, so neither did the key (Anthropic's x-api-key header survives a
    # cross-host redirect in the HTTP library).
    events = (
        openai_stream(["hi"]) if vendor is OpenAIProvider else anthropic_stream([{"text": ["hi"]}])
    )
    elsewhere = await serve(Reply(events=events))
    path = "/v1/chat/completions" if vendor is OpenAIProvider else "/v1/messages"
    target = f"http://localhost:{elsewhere.port}{path}?key={SECRET_KEY}"
    first = await serve(Reply(status=status, headers=[("Location", target)]))
    base_url = first.base_url + ("/v1" if vendor is OpenAIProvider else "")
    provider = closing(
        vendor(name="p", model="m", base_url=base_url, api_key=SECRET_KEY, context_window=None)
    )
    with trio.fail_after(10), pytest.raises(ProviderError) as caught:
        await provider.complete(user_request(), recorder)
    assert elsewhere.requests == []
    assert len(first.requests) == 1  # not retried: the redirect would come again
    cause = cause_of(caught.value)
    assert cause.startswith(f"HTTP {status}: the server redirects to http://localhost:")
    assert f"localhost:{elsewhere.port}{path}" in cause
    assert "base_url" in cause
    assert SECRET_KEY not in caught.value.reason
    assert not caught.value.retryable


def test_where_a_redirect_leads_is_shown_without_query_or_credentials() -> None:
    base = "https://api.example.com/v1/chat/completions"
    assert redirect_target(base, "https://other.example:8443/v1/x?k=1#f", ()) == (
        "https://other.example:8443/v1/x"
    )
    assert redirect_target(base, "/v2/chat/completions", ()) == (
        "https://api.example.com:443/v2/chat/completions"
    )
    assert redirect_target(base, "http://user:pw@evil.example/", ()) == "http://evil.example:80/"
    assert redirect_target(base, "http://[::1]:9/sk-x", ("sk-x",)) == "http://[::1]:9/[redacted]"
    assert redirect_target(base, None, ()) is None
    assert redirect_target(base, "http://[not a url", ()) is None


def test_a_redirect_status_is_a_failure_that_is_not_retried() -> None:
    failure = status_failure(
        302, body=None, retry_after=None, secrets=(), redirect_to="https://elsewhere.example:443/"
    )
    assert failure.reason.startswith("HTTP 302: the server redirects to https://elsewhere.example")
    assert not failure.retryable
    unknown = status_failure(307, body=None, retry_after=None, secrets=())
    assert unknown.reason.startswith("HTTP 307: the server redirects elsewhere")
