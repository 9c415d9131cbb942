"""robotad against a real llama.cpp server (llama-server 0.3.16, SmolLM2-135M) through the
``openai`` provider: tool-call turns bounded by ``maxRounds``, usage reaching
``session/context``, abort mid-stream, and a tool-call stream cut off by the provider's
``max_tokens``.

The model's words are never asserted, only the protocol and the history: every tool call
answered, the log complete, the turn's events in order. The sessions run in ``plan`` mode with
Bash, Write, Edit and WebFetch denied, so a tool the model picks can only read. One robotad and
one llama-server serve the whole module. The tests run in file order, those asking for a tool
call first: the server renders ``toolChoice: required`` prompts differently from ``none`` ones
early on, and its prompt cache serves only what the previous prompt shares.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import trio

from tests.daemon_helpers import Client, RunningDaemon, connect
from tests.real.conftest import TURN_TIMEOUT, daemon_with, logged_stop_reasons, openai_provider
from tests.real.llama_server import LlamaServer

#: Only reading tools may run; a model's other picks are denied (failed results).
READ_ONLY = {"deny": ["Bash", "Write", "Edit", "WebFetch"]}
#: One system message for every session (the default one names the cwd), so the server's
#: prompt cache serves the common prefix from the second request on.
SYSTEM = "You are a coding assistant. Use the tools to look at files when asked."


@pytest.fixture(scope="module")
def daemon(
    openai_server: LlamaServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[RunningDaemon]:
    """Two providers on the one server: ``llama``, and ``cut``, whose replies stop after 20
    tokens (``max_tokens = 20``): a tool call's name streams whole, its arguments are cut off
    mid-JSON."""
    config = (
        'default_provider = "llama"\n'
        + openai_provider("llama", openai_server)
        + openai_provider("cut", openai_server, max_tokens=20)
    )
    yield from daemon_with(tmp_path_factory, config)


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    (tmp_path / "README.md").write_text("# demo\nA small project.\n")
    (tmp_path / "main.py").write_text("print('hello')\n")
    return tmp_path


async def create(client: Client, cwd: Path, **extra: Any) -> str:
    params = {
        "cwd": str(cwd),
        "permissionMode": "plan",
        "permissions": READ_ONLY,
        "systemMessage": SYSTEM,
        "idleTimeoutMs": int(TURN_TIMEOUT * 1000),
        **extra,
    }
    info = await client.call("session/create", params)
    session_id: str = info["sessionId"]
    return session_id


async def messages_of(client: Client, session_id: str) -> list[dict[str, Any]]:
    result = await client.call("session/history", {"sessionId": session_id})
    messages: list[dict[str, Any]] = result["messages"]
    return messages


def assert_every_call_answered(messages: list[dict[str, Any]]) -> None:
    """Each assistant message's calls are followed by exactly their results, in order."""
    for index, message in enumerate(messages):
        calls = [c["id"] for c in message.get("toolCalls") or []]
        if message["role"] != "assistant" or not calls:
            continue
        following = messages[index + 1 : index + 1 + len(calls)]
        assert [m.get("toolCallId") for m in following] == calls
        assert all(m["role"] == "tool" for m in following)


async def test_a_tool_turn_completes_within_max_rounds_with_every_call_answered(
    daemon: RunningDaemon, workspace: Path
) -> None:
    with trio.fail_after(TURN_TIMEOUT):
        async with connect(daemon) as client:
            session_id = await create(client, workspace, maxRounds=2)
            result = await client.call(
                "session/run",
                {
                    "sessionId": session_id,
                    "prompt": "Read the file README.md and tell me what it says.",
                    "toolChoice": "required",
                },
            )
            finished = await client.wait_for_event(session_id, "turn_finished")
            messages = await messages_of(client, session_id)
            log = await client.call("session/log", {"sessionId": session_id})
    assert result["status"] == "completed"
    assert result["stopReason"] in ("end", "maxRounds")
    assert (finished["status"], finished["stopReason"]) == ("completed", result["stopReason"])
    assert messages[0] == {**messages[0], "role": "system", "content": SYSTEM}
    assert messages[1]["role"] == "user"
    replies = [m for m in messages if m["role"] == "assistant"]
    assert 1 <= len(replies) <= 2
    assert replies[0].get("toolCalls"), "toolChoice required: the first reply calls a tool"
    assert_every_call_answered(messages)
    if result["stopReason"] == "maxRounds":
        assert len(replies) == 2
        assert messages[-1]["role"] == "tool"
    events = client.session_events(session_id)
    started = [e["callId"] for e in events if e["type"] == "tool_started"]
    ended = {e["callId"]: e["ok"] for e in events if e["type"] == "tool_finished"}
    # The small model may name a tool that does not exist or one the rules deny: such a call
    # never starts, yet finishes, failed (PROTOCOL §6). Every call that did start finished,
    # each finished once, and every one is among the history's calls.
    called = {c["id"] for m in messages for c in m.get("toolCalls") or ()}
    assert len(ended) == len([e for e in events if e["type"] == "tool_finished"])
    assert set(started) <= set(ended) <= called
    assert not any(ok for call_id, ok in ended.items() if call_id not in started)
    assert log["complete"] is True, log["problems"]


async def test_a_tool_call_cut_off_by_the_server_is_answered_by_a_failed_result(
    daemon: RunningDaemon, workspace: Path
) -> None:
    """PROTOCOL §4: the provider's ``max_tokens = 20`` stops the server after 20 tokens
    (``finish_reason: length``), inside the call's arguments. The call is kept with
    ``arguments: {}`` — its cut text, when any came, as ``rawArguments`` — never a half
    object, and is answered by a failed result (unparseable arguments, or a required one
    missing); the history stays paired."""
    with trio.fail_after(TURN_TIMEOUT):
        async with connect(daemon) as client:
            session_id = await create(client, workspace, provider="cut", maxRounds=1)
            result = await client.call(
                "session/run",
                {
                    "sessionId": session_id,
                    "prompt": "Read the file README.md.",
                    "toolChoice": "required",
                },
            )
            messages = await messages_of(client, session_id)
    assert (result["status"], result["stopReason"]) == ("completed", "maxRounds")
    assert logged_stop_reasons(daemon, session_id) == ["length"]
    reply = messages[2]
    assert reply["role"] == "assistant"
    calls = reply["toolCalls"]
    assert calls
    for call in calls:
        assert call["arguments"] == {}, call
        if "rawArguments" in call:
            assert call["rawArguments"].strip()
    assert_every_call_answered(messages)
    results = {m["toolCallId"]: m for m in messages if m["role"] == "tool"}
    assert all(results[c["id"]]["metadata"]["ok"] is False for c in calls)


async def test_usage_from_the_server_reaches_session_context(
    daemon: RunningDaemon, workspace: Path
) -> None:
    with trio.fail_after(TURN_TIMEOUT):
        async with connect(daemon) as client:
            session_id = await create(client, workspace)
            await client.call(
                "session/run",
                {"sessionId": session_id, "prompt": "Say hello.", "toolChoice": "none"},
            )
            context = await client.call("session/context", {"sessionId": session_id})
            messages = await messages_of(client, session_id)
    usage = messages[-1]["metadata"]["usage"]
    assert usage["inputTokens"] > 0
    assert usage["outputTokens"] > 0
    expected = usage.get("totalTokens", usage["inputTokens"] + usage["outputTokens"])
    assert context["usedTokens"] == expected
    assert context["maxTokens"] == 4096
    exact = [e for e in client.session_events(session_id) if e["type"] == "context_updated"]
    assert exact[-1]["phase"] == "exact"
    assert exact[-1]["usedTokens"] == expected


async def test_abort_mid_stream_leaves_a_consistent_history(
    daemon: RunningDaemon, openai_server: LlamaServer, workspace: Path
) -> None:
    """The server is paused (SIGSTOP) once text has streamed, so the abort always lands
    mid-stream; the partial reply is kept as interrupted and the next turn runs."""
    with trio.fail_after(TURN_TIMEOUT):
        async with connect(daemon) as client:
            session_id = await create(client, workspace)
            started = await client.call(
                "session/run",
                {
                    "sessionId": session_id,
                    "prompt": "Write a long story about a robot.",
                    "toolChoice": "none",
                    "wait": False,
                },
            )
            await client.wait_for_event(session_id, "text_delta")
            openai_server.pause()
            try:
                aborted = await client.call("session/abort", {"sessionId": session_id})
                finished = await client.wait_for_event(
                    session_id, "turn_finished", turnId=started["turnId"]
                )
            finally:
                openai_server.resume()
            messages = await messages_of(client, session_id)
            # turn_finished is published just before the turn lets go of the session: wait for
            # that (bounded by the test's deadline) rather than race it.
            while (await client.call("session/get", {"sessionId": session_id}))["running"]:
                await trio.sleep(0.05)
            after = await client.call(
                "session/run",
                {"sessionId": session_id, "prompt": "Say hi.", "toolChoice": "none"},
            )
            log = await client.call("session/log", {"sessionId": session_id})
    assert aborted == {"aborted": True}
    assert finished["status"] == "aborted"
    assert [m["role"] for m in messages] == ["system", "user", "assistant"]
    partial = messages[-1]
    assert partial["state"] == "interrupted"
    streamed = "".join(
        e["text"]
        for e in client.session_events(session_id)
        if e["type"] == "text_delta" and e["turnId"] == started["turnId"]
    )
    assert partial["content"] == streamed
    assert after["status"] == "completed"
    assert log["complete"] is True, log["problems"]
