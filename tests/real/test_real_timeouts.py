"""A real llama-server that stops answering (SIGSTOP) or is gone: the turn fails with
ProviderFailed (-32007) at the session's idle timeout or at once, the history keeps everything
up to the failure (the prompt, no reply), and the session is ready for the next turn. One
robotad for the module; each test runs its own llama-server, since it stops or kills it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import trio

from protocol.errors import ProviderFailed
from tests.daemon_helpers import Client, RunningDaemon, connect
from tests.real.conftest import MAX_TOKENS, TURN_TIMEOUT, daemon_with
from tests.real.llama_server import LlamaServer, free_port, start_llama_server

#: The provider's idle timeout (``idle_timeout_ms``): how long a paused server is waited for.
IDLE_MS = 3000

PORT = free_port()


@pytest.fixture(scope="module")
def daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningDaemon]:
    config = (
        '[providers.llama]\nkind = "openai"\n'
        f'base_url = "http://127.0.0.1:{PORT}/v1"\nmodel = "smollm2"\ncontext_window = 4096\n'
        f"idle_timeout_ms = {IDLE_MS}\nconnect_timeout_ms = 5000\nmax_tokens = {MAX_TOKENS}\n"
    )
    yield from daemon_with(tmp_path_factory, config)


@pytest.fixture
def server(openai_binary: Path, smollm2: Path, tmp_path: Path) -> Iterator[LlamaServer]:
    """A 0.3.16 llama-server of this test alone, on the port the daemon's provider names."""
    running = start_llama_server(openai_binary, smollm2, tmp_path / "server.log", port=PORT)
    try:
        yield running
    finally:
        running.stop()


async def turn(client: Client, session_id: str, prompt: str) -> dict[str, Any]:
    params = {"sessionId": session_id, "prompt": prompt, "toolChoice": "none"}
    result: dict[str, Any] = await client.call("session/run", params)
    return result


async def roles(client: Client, session_id: str) -> list[str]:
    result = await client.call("session/history", {"sessionId": session_id})
    return [m["role"] for m in result["messages"]]


async def test_a_stopped_server_fails_the_turn_at_the_idle_timeout(
    daemon: RunningDaemon, server: LlamaServer, tmp_path: Path
) -> None:
    with trio.fail_after(TURN_TIMEOUT):
        async with connect(daemon) as client:
            params = {"cwd": str(tmp_path), "provider": "llama"}
            info = await client.call("session/create", params)
            session_id = info["sessionId"]
            server.pause()
            try:
                with pytest.raises(ProviderFailed) as failed:
                    await turn(client, session_id, "Say hello.")
                finished = await client.wait_for_event(session_id, "turn_finished")
                kept = await roles(client, session_id)
            finally:
                server.resume()
            info = await client.call("session/get", {"sessionId": session_id})
    assert info["idleTimeoutMs"] == IDLE_MS  # the provider's, as no session value was given
    assert failed.value.data is not None
    assert failed.value.data["reason"].startswith(f"127.0.0.1:{PORT}: ")
    assert "idle timeout" in failed.value.data["reason"]
    assert finished["status"] == "failed"
    assert finished["error"]["code"] == ProviderFailed.code
    assert kept == ["system", "user"]  # the prompt is kept; no reply was committed
    assert (info["running"], info["pending"]) == (False, None)  # ready for the next turn


async def test_a_server_that_is_gone_fails_the_turn_and_the_session_goes_on(
    daemon: RunningDaemon, server: LlamaServer, tmp_path: Path
) -> None:
    with trio.fail_after(TURN_TIMEOUT):
        async with connect(daemon) as client:
            params = {"cwd": str(tmp_path), "provider": "llama"}
            session_id = (await client.call("session/create", params))["sessionId"]
            assert server.healthy()
            server.stop()
            with pytest.raises(ProviderFailed) as failed:
                await turn(client, session_id, "Say hello again.")
            info = await client.call("session/get", {"sessionId": session_id})
            kept = await roles(client, session_id)
    assert failed.value.data is not None
    assert failed.value.data["provider"] == "llama"
    assert failed.value.data["reason"].startswith(f"127.0.0.1:{PORT}: ")
    assert "connection refused" in failed.value.data["reason"]  # at once, not waited for
    assert kept == ["system", "user"]
    assert (info["running"], info["pending"]) == (False, None)
