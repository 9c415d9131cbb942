"""Fixtures of the provider tests: a loopback server starter, a recording observer, and a
closer that ends every provider a test made."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TypeVar

import pytest
import trio

from protocol.shapes import Message
from robotad.agent.provider import ModelRequest, Provider, StreamObserver
from robotad.providers.anthropic import AnthropicProvider
from robotad.providers.openai import OpenAIProvider
from robotad.providers.retry import RetryPolicy

from .fake_servers import FakeModelServer, Reply

#: Retries that wait next to nothing, so retry tests on real sockets stay fast.
QUICK_RETRIES = RetryPolicy(max_retries=2, base_delay=0.001, max_delay=0.005, retry_after_cap=0.01)
NO_RETRIES = RetryPolicy(max_retries=0)

#: A key nobody would type by accident: tests assert it never shows up where it must not.
SECRET_KEY = "sk-robota-SECRET-7f3a9c21e4d8"


def cause_of(error: BaseException) -> str:
    """A provider failure's reason without its leading ``host:port: `` (the endpoint)."""
    reason = str(getattr(error, "reason", error))
    endpoint, separator, cause = reason.partition(": ")
    assert separator, reason
    assert endpoint.rsplit(":", 1)[-1].isdigit(), reason
    return cause


Serve = Callable[..., Awaitable[FakeModelServer]]

P = TypeVar("P", bound=Provider)


class Recorder:
    """A `StreamObserver` that keeps what it was told, in order."""

    def __init__(self) -> None:
        self.texts: list[str] = []
        self.activity = 0
        #: Characters the activity added besides text (tool-call arguments, thinking).
        self.chars = 0
        self.order: list[str] = []

    def on_text(self, delta: str) -> None:
        self.texts.append(delta)
        self.order.append("text")

    def on_activity(self, chars: int = 0) -> None:
        self.activity += 1
        self.chars += chars
        self.order.append("activity")


@pytest.fixture
def recorder() -> Recorder:
    return Recorder()


class ProviderCloser:
    """Hands back each provider given to it; `aclose` closes them all."""

    def __init__(self) -> None:
        self._made: list[Provider] = []

    def __call__(self, provider: P) -> P:
        self._made.append(provider)
        return provider

    async def aclose(self) -> None:
        for provider in self._made:
            await provider.aclose()


@pytest.fixture
async def closing() -> AsyncIterator[ProviderCloser]:
    """Wrap each provider a test builds in ``closing(...)``; all are closed with the test."""
    closer = ProviderCloser()
    yield closer
    await closer.aclose()


@pytest.fixture
def serve(nursery: trio.Nursery) -> Serve:
    """Start a `FakeModelServer` answering with the given replies; stopped with the test."""

    async def start(*replies: Reply) -> FakeModelServer:
        server = FakeModelServer(replies)
        await nursery.start(server.run)
        return server

    return start


async def refused_port() -> int:
    """A loopback port nothing listens on (bound, then closed)."""
    listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
    port: int = listeners[0].socket.getsockname()[1]
    for listener in listeners:
        await listener.aclose()
    return port


async def cancel_when_stalled(
    provider: Provider, server: FakeModelServer, observer: StreamObserver
) -> None:
    """Make one call and cancel it once `server` has stalled mid-stream; return when the
    provider has closed that connection."""
    async with trio.open_nursery() as nursery:
        cancel_scope = trio.CancelScope()

        async def call() -> None:
            with cancel_scope:
                await provider.complete(user_request(), observer)

        nursery.start_soon(call)
        await server.stalled.wait()
        cancel_scope.cancel()
    await server.peer_closed.wait()


def user_request(text: str = "hi", **kwargs: object) -> ModelRequest:
    return ModelRequest(messages=[Message.user(text)], tools=[], **kwargs)  # type: ignore[arg-type]


def fake_served(
    vendor: type[OpenAIProvider] | type[AnthropicProvider],
    base_url: str,
    retry_policy: RetryPolicy = NO_RETRIES,
) -> OpenAIProvider | AnthropicProvider:
    """A `vendor` provider of a fake server at `base_url`, with a key (no retries unless
    `retry_policy` says)."""
    return vendor(
        name="p",
        model="m",
        base_url=base_url,
        api_key="k",
        context_window=None,
        retry_policy=retry_policy,
    )
