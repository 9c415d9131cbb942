"""robotad's ``anthropic`` provider against a real llama-server 0.3.36 serving Anthropic's
``/v1/messages``: streamed text, usage reaching ``session/context``, and the stop reason of a
reply cut by the token budget. SmolLM2 makes no tool calls through this endpoint, so these are
text turns; the model's words are never asserted. One robotad and one server for the module.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import trio

from tests.daemon_helpers import RunningDaemon, connect
from tests.real.conftest import (
    TURN_TIMEOUT,
    anthropic_provider,
    daemon_with,
    logged_stop_reasons,
)
from tests.real.llama_server import LlamaServer

#: Shared by every session, so the server's prompt cache serves it from the second turn on.
SYSTEM = "You are a helpful assistant."


def session_params(cwd: Path, max_rounds: int) -> dict[str, Any]:
    return {
        "cwd": str(cwd),
        "permissionMode": "plan",
        "maxRounds": max_rounds,
        "systemMessage": SYSTEM,
        "idleTimeoutMs": int(TURN_TIMEOUT * 1000),
    }


@pytest.fixture(scope="module")
def daemon(
    anthropic_server: LlamaServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[RunningDaemon]:
    config = 'default_provider = "claude"\n' + anthropic_provider("claude", anthropic_server)
    yield from daemon_with(tmp_path_factory, config)


async def test_text_streams_and_usage_reaches_the_context(
    daemon: RunningDaemon, tmp_path: Path
) -> None:
    with trio.fail_after(TURN_TIMEOUT):
        async with connect(daemon) as client:
            params = session_params(tmp_path, 2)
            session_id = (await client.call("session/create", params))["sessionId"]
            result = await client.call(
                "session/run", {"sessionId": session_id, "prompt": "Tell me about the sea."}
            )
            history = await client.call("session/history", {"sessionId": session_id})
            context = await client.call("session/context", {"sessionId": session_id})
            log = await client.call("session/log", {"sessionId": session_id})
    messages: list[dict[str, Any]] = history["messages"]
    assert result["status"] == "completed"
    assert result["stopReason"] in ("end", "maxRounds")
    events = client.session_events(session_id)
    streamed = "".join(e["text"] for e in events if e["type"] == "text_delta")
    assert streamed
    assert [m["role"] for m in messages[:2]] == ["system", "user"]
    reply = messages[-1]
    assert reply["role"] == "assistant"
    assert reply["state"] == "complete"
    if result["stopReason"] == "end":
        assert reply["content"] == streamed == result["response"]
    usage = reply["metadata"]["usage"]
    assert usage["inputTokens"] > 0
    assert 0 < usage["outputTokens"] <= 64  # the provider's max_tokens budget
    expected = usage.get("totalTokens", usage["inputTokens"] + usage["outputTokens"])
    assert context["usedTokens"] == expected
    assert log["complete"] is True, log["problems"]


async def test_the_stop_reason_of_a_reply_cut_by_the_token_budget_is_logged(
    daemon: RunningDaemon, tmp_path: Path
) -> None:
    """A long answer hits ``max_tokens = 64``: the turn still completes, and the session
    log's normalised provider response carries the server's stop reason."""
    with trio.fail_after(TURN_TIMEOUT):
        async with connect(daemon) as client:
            params = session_params(tmp_path, 1)
            session_id = (await client.call("session/create", params))["sessionId"]
            result = await client.call(
                "session/run",
                {"sessionId": session_id, "prompt": "Write a very long essay about rivers."},
            )
    assert (result["status"], result["stopReason"]) == ("completed", "end")
    assert logged_stop_reasons(daemon, session_id) == ["max_tokens"]
