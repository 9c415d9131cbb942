"""No provider failure lets the API key into an error or a log line, whatever the server says."""

from __future__ import annotations

import json
import logging
import traceback
from collections.abc import Callable

import pytest

from robotad.agent.provider import Provider, ProviderError
from robotad.providers.anthropic import AnthropicProvider
from robotad.providers.openai import OpenAIProvider

from . import provider_checks as checks
from .conftest import (
    QUICK_RETRIES,
    SECRET_KEY,
    ProviderCloser,
    Recorder,
    Serve,
    refused_port,
)
from .fake_servers import Reply, anthropic_stream, openai_chunk, sse

#: The distinctive middle of the key: no partial echo of it may appear either.
SECRET_CORE = "SECRET-7f3a9c21e4d8"

MakeProvider = Callable[[str, str, str], Provider]


@pytest.fixture
def make_provider(closing: ProviderCloser) -> MakeProvider:
    def make(kind: str, base_url: str, key: str) -> Provider:
        cls = OpenAIProvider if kind == "openai" else AnthropicProvider
        return closing(
            cls(
                name=kind,
                model="some-model",
                base_url=base_url,
                api_key=key,
                context_window=None,
                retry_policy=QUICK_RETRIES,
            )
        )

    return make


def _echoing_error(status: int) -> Reply:
    """An error answer whose message quotes the key, the way some servers quote a bad one."""
    message = f"Incorrect API key provided: {SECRET_KEY}. Bearer {SECRET_KEY}"
    body = {"type": "error", "error": {"type": "x", "message": message}}
    return Reply(status=status, body=json.dumps(body).encode())


def _echoing_stream_error(kind: str) -> Reply:
    error = {"type": "error", "error": {"type": "api_error", "message": f"bad key {SECRET_KEY}"}}
    if kind == "openai":
        events = [openai_chunk({"content": "x"}), sse(error)]
    else:
        events = [*anthropic_stream([{"text": ["x"]}])[:4], sse(error, "error")]
    return Reply(events=events)


@pytest.fixture(autouse=True)
def _debug_logs(caplog: pytest.LogCaptureFixture) -> None:
    """Every log line, down to DEBUG, is captured and checked for the key."""
    caplog.set_level(logging.DEBUG)


async def failure_without_the_key(
    provider: Provider, recorder: Recorder, caplog: pytest.LogCaptureFixture
) -> ProviderError:
    """The call's `ProviderError`, once checked: the key is in neither it nor a log line."""
    error = await checks.failure_of(provider, recorder)
    _assert_clean(error, caplog)
    return error


def _assert_clean(err: ProviderError, caplog: pytest.LogCaptureFixture) -> None:
    texts = [str(err), repr(err), err.reason, "".join(traceback.format_exception(err))]
    formatter = logging.Formatter()
    for record in caplog.records:
        texts.append(formatter.format(record))
    texts.append(caplog.text)
    for text in texts:
        assert SECRET_CORE not in text


@pytest.mark.parametrize("kind", ["openai", "anthropic"])
@pytest.mark.parametrize("status", [400, 401, 403, 429, 500])
async def test_no_key_in_errors_or_logs_for_http_failures(
    kind: str,
    status: int,
    serve: Serve,
    make_provider: MakeProvider,
    recorder: Recorder,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """G-206: a provider failure's reason never contains a key."""
    server = await serve(_echoing_error(status))
    provider = make_provider(kind, server.base_url, SECRET_KEY)
    error = await failure_without_the_key(provider, recorder, caplog)
    assert error.status == status
    # the key did go out, in the header where it belongs
    assert SECRET_KEY in server.requests[0].headers["authorization"]


@pytest.mark.parametrize("kind", ["openai", "anthropic"])
async def test_no_key_in_errors_or_logs_for_a_stream_error(
    kind: str,
    serve: Serve,
    make_provider: MakeProvider,
    recorder: Recorder,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """G-206: an error event inside the stream is reported without the key."""
    server = await serve(_echoing_stream_error(kind))
    provider = make_provider(kind, server.base_url, SECRET_KEY)
    error = await failure_without_the_key(provider, recorder, caplog)
    assert "[redacted]" in error.reason


@pytest.mark.parametrize("kind", ["openai", "anthropic"])
async def test_no_key_in_errors_or_logs_when_the_connection_fails(
    kind: str, make_provider: MakeProvider, recorder: Recorder, caplog: pytest.LogCaptureFixture
) -> None:
    """G-206: connection failures are named by class, never by a transport message."""
    port = await refused_port()
    provider = make_provider(kind, f"http://127.0.0.1:{port}", SECRET_KEY)
    await failure_without_the_key(provider, recorder, caplog)


@pytest.mark.parametrize("cls", [OpenAIProvider, AnthropicProvider])
@pytest.mark.parametrize("bad", [SECRET_KEY + "\n", " " + SECRET_KEY, SECRET_KEY + "é", ""])
def test_a_key_that_cannot_be_a_header_is_refused_without_quoting_it(
    cls: type[OpenAIProvider] | type[AnthropicProvider], bad: str
) -> None:
    """An HTTP library refusing the header would quote its value in its error and debug log;
    the provider refuses such a key up front, in words that do not include it."""
    with pytest.raises(ValueError, match="api_key") as caught:
        cls(name="p", model="m", base_url=None, api_key=bad, context_window=None)
    assert SECRET_CORE not in str(caught.value)
