"""What a model server's answer may make robotad hold (`robotad.http_bounds`): a line or an
event without end and an error body without end are cut off instead of growing the daemon until the
turn's idle deadline; answers are asked for uncompressed, and one compressed anyway is refused.
Against a loopback server that never ends what it sends: without the bounds each call would
wait for ever (the tests' own deadline fails them)."""

from __future__ import annotations

import gzip

import pytest
import trio

from robotad.agent.provider import ProviderError
from robotad.http_bounds import MAX_ERROR_BODY_BYTES, MAX_MESSAGE_BYTES
from robotad.providers.anthropic import AnthropicProvider
from robotad.providers.openai import OpenAIProvider

from .conftest import ProviderCloser, Recorder, Serve, cause_of, fake_served, user_request
from .fake_servers import (
    FakeModelServer,
    Reply,
    anthropic_stream,
    openai_stream,
)

Vendor = type[OpenAIProvider] | type[AnthropicProvider]
VENDORS = pytest.mark.parametrize("vendor", [OpenAIProvider, AnthropicProvider])
#: Pieces of 64 KiB the endless bodies send before they stall (more than either bound).
PIECE = 64 * 1024


def provider_for(vendor: Vendor, server: FakeModelServer, closing: ProviderCloser) -> object:
    path = "/v1" if vendor is OpenAIProvider else ""
    return closing(fake_served(vendor, server.base_url + path))


async def failure_of(provider: object, recorder: Recorder) -> ProviderError:
    with trio.fail_after(20), pytest.raises(ProviderError) as caught:
        await provider.complete(user_request(), recorder)  # type: ignore[attr-defined]
    return caught.value


@VENDORS
async def test_a_line_without_end_fails_at_the_bound(
    vendor: Vendor, serve: Serve, closing: ProviderCloser, recorder: Recorder
) -> None:
    """The OpenAI SDK keeps a line until it ends; a server that never ends one (here it
    stalls after sending past the bound) is cut off there, naming why."""
    opening = b'data: {"choices":[{"index":0,"delta":{"content":"'
    pieces = [opening] + [b"x" * PIECE] * (MAX_MESSAGE_BYTES // PIECE + 2)
    server = await serve(Reply(events=pieces, stall_after=len(pieces), coalesce=False))
    failure = await failure_of(provider_for(vendor, server, closing), recorder)
    assert cause_of(failure) == (
        "the server sent a line longer than 16 MiB without ending it: no event stream robotad "
        "can read"
    )
    assert failure.retryable is False
    assert recorder.texts == []


@VENDORS
async def test_an_event_without_end_fails_at_the_bound(
    vendor: Vendor, serve: Serve, closing: ProviderCloser, recorder: Recorder
) -> None:
    """The SDKs keep an event's data lines until the event ends: short lines that never end
    their event (no empty line) are cut off at the bound too, naming why."""
    line = b"data: " + b"x" * (PIECE - 7) + b"\n"
    pieces = [line] * (MAX_MESSAGE_BYTES // PIECE + 2)
    server = await serve(Reply(events=pieces, stall_after=len(pieces), coalesce=False))
    failure = await failure_of(provider_for(vendor, server, closing), recorder)
    assert cause_of(failure) == (
        "the server sent an event longer than 16 MiB without ending it: no event stream "
        "robotad can read"
    )
    assert recorder.texts == []


@VENDORS
async def test_an_error_body_without_end_is_read_to_the_bound(
    vendor: Vendor, serve: Serve, closing: ProviderCloser, recorder: Recorder
) -> None:
    """The SDKs read an error's whole body before raising: a body that never ends is read to
    `MAX_ERROR_BODY_BYTES`, and the failure is still named by its status."""
    pieces = [b"x" * PIECE] * (MAX_ERROR_BODY_BYTES // PIECE + 4)
    endless = Reply(
        status=500,
        events=pieces,
        stall_after=len(pieces),
        coalesce=False,
        content_type="text/plain",
    )
    server = await serve(endless)
    failure = await failure_of(provider_for(vendor, server, closing), recorder)
    assert cause_of(failure) == "HTTP 500: server error"
    assert failure.retryable is True


@VENDORS
async def test_answers_are_asked_for_uncompressed_and_a_compressed_one_is_refused(
    vendor: Vendor, serve: Serve, closing: ProviderCloser, recorder: Recorder
) -> None:
    events = (
        openai_stream(["hi"]) if vendor is OpenAIProvider else anthropic_stream([{"text": ["hi"]}])
    )
    packed = [gzip.compress(b"".join(events))]
    server = await serve(Reply(events=packed, headers=[("Content-Encoding", "gzip")]))
    failure = await failure_of(provider_for(vendor, server, closing), recorder)
    assert server.requests[0].headers["accept-encoding"] == "identity"
    assert cause_of(failure).startswith("the server compressed its answer (gzip) though asked")
    assert recorder.texts == []


@VENDORS
async def test_a_compressed_error_is_still_named_by_its_status(
    vendor: Vendor, serve: Serve, closing: ProviderCloser, recorder: Recorder
) -> None:
    """Its body is dropped unread (it could unpack to any size); the status says enough."""
    packed = gzip.compress(b'{"error": {"message": "' + b"y" * 100_000 + b'"}}')
    server = await serve(Reply(status=503, body=packed, headers=[("Content-Encoding", "gzip")]))
    failure = await failure_of(provider_for(vendor, server, closing), recorder)
    assert cause_of(failure) == "HTTP 503: server error"


@VENDORS
async def test_an_ordinary_answer_passes_the_bounds_untouched(
    vendor: Vendor, serve: Serve, closing: ProviderCloser, recorder: Recorder
) -> None:
    """Lines of 1 MiB (under the bound) in small pieces, line breaks of every kind."""
    big = "z" * (1 << 20)
    events = (
        openai_stream([big, "!"])
        if vendor is OpenAIProvider
        else anthropic_stream([{"text": [big, "!"]}])
    )
    server = await serve(Reply(events=[event.replace(b"\n\n", b"\r\n\r\n") for event in events]))
    with trio.fail_after(20):
        reply = await provider_for(vendor, server, closing).complete(  # type: ignore[attr-defined]
            user_request(), recorder
        )
    assert reply.text == big + "!"
