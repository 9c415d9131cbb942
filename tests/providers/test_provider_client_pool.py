"""The pool of SDK clients (`robotad.providers.clients`): one client per configuration,
shared by providers, built off the event loop, bounded, closed with the pool; and what a
shared kept-alive connection must not change about failures."""

from __future__ import annotations

import threading
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
import trio

from robotad.agent.provider import ProviderError
from robotad.providers import ProviderPlan, new_sdk_client, provider_of
from robotad.providers.anthropic import AnthropicProvider
from robotad.providers.clients import ClientKey, ClientPool, PoolClosed
from robotad.providers.openai import OpenAIProvider
from robotad.providers.retry import RetryPolicy

from .conftest import NO_RETRIES, SECRET_KEY, ProviderCloser, Recorder, Serve, user_request
from .fake_servers import FakeModelServer, Reply, anthropic_stream, openai_stream

TIMEOUT = 10.0


@pytest.fixture
async def pool() -> AsyncIterator[ClientPool]:
    clients = ClientPool(new_sdk_client)
    yield clients
    await clients.aclose()


async def _openai(
    pool: ClientPool,
    server: FakeModelServer,
    *,
    key: str | None = "sk-test",
    connect_timeout: float = 10.0,
    policy: RetryPolicy = NO_RETRIES,
) -> OpenAIProvider:
    lease = await pool.lease(
        "openai", base_url=server.base_url, api_key=key, connect_timeout=connect_timeout
    )
    return OpenAIProvider(
        name="oa",
        model="gpt-4o-mini",
        base_url=server.base_url,
        api_key=key,
        context_window=None,
        connect_timeout=connect_timeout,
        retry_policy=policy,
        lease=lease,
    )


def _stream(text: str = "ok") -> Reply:
    return Reply(events=openai_stream([text]))


async def test_two_providers_of_one_configuration_share_one_client_and_one_connection(
    serve: Serve, pool: ClientPool, closing: ProviderCloser, recorder: Recorder
) -> None:
    server = await serve(_stream("shared"))
    first = closing(await _openai(pool, server))
    second = closing(await _openai(pool, server))
    with trio.fail_after(TIMEOUT):
        for provider in (first, second, first):
            assert (await provider.complete(user_request(), recorder)).text == "shared"
    assert len(pool) == 1
    assert len(server.requests) == 3
    assert server.accepted == 1  # one kept-alive connection served all three calls


async def test_closing_one_provider_leaves_the_others_client_working(
    serve: Serve, pool: ClientPool, closing: ProviderCloser, recorder: Recorder
) -> None:
    server = await serve(_stream("still here"))
    first = await _openai(pool, server)
    second = closing(await _openai(pool, server))
    with trio.fail_after(TIMEOUT):
        await first.complete(user_request(), recorder)
        await first.aclose()
        reply = await second.complete(user_request(), recorder)
    assert reply.text == "still here"
    assert server.accepted == 1  # not even the connection was closed


async def test_a_different_key_base_url_or_timeout_gets_its_own_client(
    serve: Serve, pool: ClientPool, closing: ProviderCloser, recorder: Recorder
) -> None:
    server = await serve(_stream())
    other = await serve(_stream())
    providers = [
        closing(await _openai(pool, server, key="sk-one")),
        closing(await _openai(pool, server, key="sk-two")),
        closing(await _openai(pool, server, key="sk-one", connect_timeout=3.0)),
        closing(await _openai(pool, other, key="sk-one")),
        closing(await _openai(pool, server, key="sk-one")),  # the first one's again
    ]
    assert len(pool) == 4
    with trio.fail_after(TIMEOUT):
        for provider in providers:
            await provider.complete(user_request(), recorder)
    keys = [request.headers["authorization"] for request in server.requests]
    assert keys == ["Bearer sk-one", "Bearer sk-two", "Bearer sk-one", "Bearer sk-one"]
    assert (server.accepted, other.accepted) == (3, 1)


async def test_concurrent_leases_of_one_configuration_build_one_client_in_a_worker_thread(
    serve: Serve,
) -> None:
    server = await serve(_stream())
    builds: list[bool] = []
    release = threading.Event()

    def builder(kind: str, base_url: str | None, key: str | None, timeout: float) -> Any:
        builds.append(threading.current_thread() is threading.main_thread())
        release.wait(TIMEOUT)  # hold the build until every lease is waiting for it
        return new_sdk_client(kind, base_url, key, timeout)

    pool = ClientPool(builder)
    clients: list[object] = []

    async def lease() -> None:
        held = await pool.lease(
            "openai", base_url=server.base_url, api_key="sk-a", connect_timeout=5.0
        )
        clients.append(held.client)
        await held.release()

    with trio.fail_after(TIMEOUT):
        async with trio.open_nursery() as nursery:
            for _ in range(4):
                nursery.start_soon(lease)
            await trio.testing.wait_all_tasks_blocked()
            release.set()
        await pool.aclose()
    assert builds == [False]  # built once, and not on the event loop's thread
    assert len(clients) == 4
    assert len({id(client) for client in clients}) == 1


class _FakeClient:
    def __init__(self, name: str) -> None:
        self.name = name
        self.closed = False

    async def close(self) -> None:
        self.closed = True


def _fake_builder() -> tuple[Callable[..., Any], dict[str, list[_FakeClient]]]:
    """A builder of fake clients, and every client it built, by base URL."""
    made: dict[str, list[_FakeClient]] = {}

    def build(kind: str, base_url: str | None, key: str | None, timeout: float) -> Any:
        client = _FakeClient(str(base_url))
        made.setdefault(str(base_url), []).append(client)
        return client

    return build, made


def _closed(made: dict[str, list[_FakeClient]], *names: str) -> list[bool]:
    return [client.closed for name in names for client in made[name]]


async def _lease_and_release(pool: ClientPool, base_url: str) -> None:
    lease = await pool.lease("openai", base_url=base_url, api_key=None, connect_timeout=1.0)
    await lease.release()


async def test_a_client_nobody_holds_for_the_idle_time_is_dropped_and_closed(
    mock_clock: trio.testing.MockClock,
) -> None:
    build, made = _fake_builder()
    pool = ClientPool(build, idle_seconds=300.0)
    held = await pool.lease("openai", base_url="held", api_key=None, connect_timeout=1.0)
    await _lease_and_release(pool, "let-go")
    mock_clock.jump(299.0)
    await _lease_and_release(pool, "other")
    assert _closed(made, "let-go", "held", "other") == [False, False, False]
    mock_clock.jump(2.0)
    await _lease_and_release(pool, "other")  # the next use sweeps
    assert _closed(made, "let-go", "held", "other") == [True, False, False]
    assert len(pool) == 2
    mock_clock.jump(301.0)
    await held.release()  # a release sweeps too: `other` has been idle past its time
    assert _closed(made, "held", "other") == [False, True]
    await _lease_and_release(pool, "let-go")  # leased again: built afresh
    assert _closed(made, "let-go") == [True, False]
    await pool.aclose()


async def test_beyond_max_idle_the_longest_idle_client_is_closed(
    mock_clock: trio.testing.MockClock,
) -> None:
    build, made = _fake_builder()
    pool = ClientPool(build, max_idle=2)
    await _lease_and_release(pool, "a")
    mock_clock.jump(1.0)
    await _lease_and_release(pool, "b")
    await _lease_and_release(pool, "c")  # at the same clock reading as b: made later
    await _lease_and_release(pool, "b")  # b again: now idle since after c
    assert _closed(made, "a", "b", "c") == [True, False, False]
    await _lease_and_release(pool, "d")
    assert _closed(made, "b", "c", "d") == [False, True, False]
    assert len(pool) == 2
    await pool.aclose()
    assert _closed(made, "b", "d") == [True, True]


async def test_closing_the_pool_closes_every_client_and_refuses_leases() -> None:
    build, made = _fake_builder()
    pool = ClientPool(build)
    held = await pool.lease("openai", base_url="held", api_key=None, connect_timeout=1.0)
    await _lease_and_release(pool, "idle")
    with trio.CancelScope() as scope:
        scope.cancel()
        await pool.aclose()  # shielded: a cancelled caller still closes everything
    assert _closed(made, "held", "idle") == [True, True]
    with pytest.raises(PoolClosed):
        await pool.lease("openai", base_url="new", api_key=None, connect_timeout=1.0)
    await held.release()  # a late release is harmless
    assert "new" not in made


async def test_a_server_gone_between_calls_fails_with_connection_refused(
    serve: Serve, pool: ClientPool, closing: ProviderCloser, recorder: Recorder
) -> None:
    """The pooled client's kept-alive connection to a server that went away is noticed and
    dropped, so the next call fails as a fresh client's would: connection refused."""
    server = await serve(_stream())
    provider = closing(await _openai(pool, server))
    with trio.fail_after(TIMEOUT):
        await provider.complete(user_request(), recorder)
        assert server.open_connections == 1
        server.stop()
        await server.wait_all_closed()
        with pytest.raises(ProviderError) as caught:
            await provider.complete(user_request(), recorder)
    assert caught.value.reason == f"127.0.0.1:{server.port}: connection refused"


async def test_a_connection_the_server_dropped_between_calls_is_replaced(
    serve: Serve, pool: ClientPool, closing: ProviderCloser, recorder: Recorder
) -> None:
    server = await serve(_stream("again"))
    provider = closing(await _openai(pool, server))
    with trio.fail_after(TIMEOUT):
        await provider.complete(user_request(), recorder)
        await server.drop_connections()
        reply = await provider.complete(user_request(), recorder)
    assert reply.text == "again"
    assert server.accepted == 2


async def test_anthropic_providers_share_a_pooled_client_too(
    serve: Serve, pool: ClientPool, closing: ProviderCloser, recorder: Recorder
) -> None:
    server = await serve(Reply(events=anthropic_stream([{"text": ["hi"]}])))
    plan = ProviderPlan(
        "an", "anthropic", "claude-x", None, 30.0, 5.0, base_url=server.base_url, api_key="k"
    )
    providers = []
    for _ in range(2):
        lease = await pool.lease(
            "anthropic", base_url=server.base_url, api_key="k", connect_timeout=5.0
        )
        providers.append(closing(provider_of(plan, lease)))
    assert all(isinstance(provider, AnthropicProvider) for provider in providers)
    with trio.fail_after(TIMEOUT):
        for provider in providers:
            assert (await provider.complete(user_request(), recorder)).text == "hi"
    assert (len(pool), server.accepted) == (1, 1)


async def test_the_pool_never_shows_a_key() -> None:
    build, _made = _fake_builder()
    pool = ClientPool(build)
    plan = ProviderPlan("oa", "openai", "m", None, 1.0, 1.0, api_key=SECRET_KEY)
    key = ClientKey.of("openai", None, SECRET_KEY, 1.0)
    assert SECRET_KEY not in repr(plan) + repr(key) + repr(pool)
    assert SECRET_KEY.encode() not in key.key_digest
    with pytest.raises(ValueError, match="api_key must be") as refused:
        await pool.lease("openai", base_url=None, api_key="bad key\n", connect_timeout=1.0)
    assert "bad key" not in str(refused.value)
    assert len(pool) == 0
