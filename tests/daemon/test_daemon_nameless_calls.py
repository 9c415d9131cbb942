"""A model's tool call without a name, end to end through a real robotad: the scripted
provider, and the OpenAI and Anthropic providers over their official SDKs.

The reply used to enter history with its nameless call. The call never ran, and every later
request sent it back to a provider that refuses it (OpenAI: ``Invalid
'messages[2].tool_calls[0].function.name'``; Anthropic: ``tool_use.name: String should have at
least 1 character``): the session failed every turn after. Now the turn fails ProviderFailed
(-32007) naming the defect, nothing of the reply is kept, the log says what came back, and
the next turn runs without a trace of it (G-209)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import trio

from protocol.errors import ProviderFailed
from tests.daemon_helpers import (
    IO_TIMEOUT,
    Client,
    DaemonHome,
    RunningDaemon,
    connect,
    module_daemon,
    running_daemon,
)
from tests.providers.fake_servers import (
    FakeModelServer,
    Reply,
    anthropic_stream,
    openai_stream,
)

daemon = module_daemon()


def log_entries(home: DaemonHome, session_id: str) -> list[dict[str, Any]]:
    text = (home.state_dir / "logs" / f"{session_id}.jsonl").read_text()
    return [json.loads(line) for line in text.splitlines()]


async def fail_then_run(client: Client, session_id: str) -> tuple[ProviderFailed, dict[str, Any]]:
    """Run a turn that must fail ProviderFailed, then one that must complete; the failure and
    the completed turn's result."""
    await client.call("session/subscribe", {"sessionId": session_id})
    with pytest.raises(ProviderFailed) as failed:
        await client.call(
            "session/run", {"sessionId": session_id, "prompt": "look", "turnId": "t1"}
        )
    again = await client.call("session/run", {"sessionId": session_id, "prompt": "and now?"})
    assert again["status"] == "completed", again
    return failed.value, again


async def test_a_scripted_nameless_call_fails_the_turn_and_the_session_runs_on(
    daemon: RunningDaemon, tmp_path: Path
) -> None:
    step = {"text": "let me look", "toolCalls": [{"name": "Read", "arguments": {}}, {"name": " "}]}
    with trio.fail_after(IO_TIMEOUT):
        async with connect(daemon) as client:
            info = await client.call("session/create", {"cwd": str(tmp_path), "script": [step]})
            session_id = info["sessionId"]
            failure, _ = await fail_then_run(client, session_id)
            finished = await client.wait_for_event(session_id, "turn_finished", turnId="t1")
            history = await client.call("session/history", {"sessionId": session_id})
            report = await client.call("session/log", {"sessionId": session_id})
    reason = failure.data["reason"]
    assert failure.data == {
        "sessionId": session_id,
        "turnId": "t1",
        "provider": "scripted",
        "reason": reason,
    }
    assert reason.startswith("the model called a tool with a name of only whitespace (' ') ")
    assert "(tool call 2 of 2, id 'call_" in reason
    assert reason.endswith("nothing of the reply was kept: send the prompt again")
    assert (finished["status"], finished["error"]["code"]) == ("failed", -32007)
    assert [(m["role"], m["content"]) for m in history["messages"]] == [
        ("user", "look"),
        ("user", "and now?"),
        ("assistant", "echo: and now?"),
    ]
    assert "toolCalls" not in daemon.home.record_path(session_id).read_text()
    assert report["problems"] == [], report
    assert report["complete"], report
    # The log answers the request with the error and what came back.
    entries = log_entries(daemon.home, session_id)
    refused = next(e["data"] for e in entries if e["event"] == "provider_response")
    assert refused["error"] == reason
    assert [c["name"] for c in refused["raw"]["tool_calls"]] == ["Read", " "]
    failed = next(e for e in entries if e["event"] == "turn_failed")
    assert reason in json.dumps(failed["data"])


def openai_nameless() -> Reply:
    call = {"index": 0, "id": "call_1", "type": "function"}
    call["function"] = {"name": "", "arguments": "{}"}
    return Reply(
        events=openai_stream(["let me look"], tool_deltas=[[call]], finish_reason="tool_calls")
    )


def anthropic_nameless() -> Reply:
    blocks = [{"text": ["let me look"]}, {"tool_use": ("toolu_1", "", ["{}"])}]
    return Reply(events=anthropic_stream(blocks, stop_reason="tool_use"))


VENDORS = {
    "openai": (openai_nameless, lambda: Reply(events=openai_stream(["fine"]))),
    "anthropic": (anthropic_nameless, lambda: Reply(events=anthropic_stream([{"text": ["fine"]}]))),
}


@pytest.mark.parametrize("kind", sorted(VENDORS))
async def test_a_vendor_s_nameless_call_is_never_sent_back(
    kind: str, tmp_path: Path, nursery: trio.Nursery
) -> None:
    nameless, plain = VENDORS[kind]
    server = FakeModelServer([nameless(), plain()])
    await nursery.start(server.run)
    home = DaemonHome(tmp_path / "home")
    home.write_config(server.provider_config(kind))
    with running_daemon(home) as running, trio.fail_after(IO_TIMEOUT * 3):
        async with connect(running) as client:
            create = {"cwd": str(tmp_path), "provider": "fake", "sessionId": "s"}
            await client.call("session/create", create)
            failure, again = await fail_then_run(client, "s")
    assert failure.data["provider"] == "fake"
    assert (
        f"127.0.0.1:{server.port}: the model called a tool with an empty name"
        in (failure.data["reason"])
    )
    assert again["response"] == "fine"
    # The second request holds both prompts and nothing of the refused reply.
    sent = json.dumps(server.requests[-1].body)
    assert '"look"' in sent
    assert '"and now?"' in sent
    assert "let me look" not in sent
    assert "tool_calls" not in sent
    assert "tool_use" not in sent
