"""Fixtures of the provider tests: a loopback server starter and a recording observer."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import pytest
import trio

from protocol.shapes import Message
from robotad.agent.provider import ModelRequest
from robotad.providers.retry import RetryPolicy

from .fake_servers import FakeModelServer, Reply

#: Retries that wait next to nothing, so retry tests on real sockets stay fast.
QUICK_RETRIES = RetryPolicy(max_retries=2, base_delay=0.001, max_delay=0.005, retry_after_cap=0.01)
NO_RETRIES = RetryPolicy(max_retries=0)

#: A key nobody would type by accident: tests assert it never shows up where it must not.
SECRET_KEY = "sk-robota-SECRET-7f3a9c21e4d8"

Serve = Callable[..., Awaitable[FakeModelServer]]


class Recorder:
    """A `StreamObserver` that keeps what it was told, in order."""

    def __init__(self) -> None:
        self.texts: list[str] = []
        self.activity = 0
        self.order: list[str] = []

    def on_text(self, delta: str) -> None:
        self.texts.append(delta)
        self.order.append("text")

    def on_activity(self) -> None:
        self.activity += 1
        self.order.append("activity")


@pytest.fixture
def recorder() -> Recorder:
    return Recorder()


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


def user_request(text: str = "hi", **kwargs: object) -> ModelRequest:
    return ModelRequest(messages=[Message.user(text)], tools=[], **kwargs)  # type: ignore[arg-type]
