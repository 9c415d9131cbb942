"""A reply holding half a surrogate pair, through a real robotad and the official Anthropic
SDK: JSON may escape one on its own (``"\\udcff"``) and the SDK's parser takes it as it is.
UTF-8 cannot encode it, so the turn failed -32603 at its first encoding (the context
estimate), the reply lost and the session's next turn sent a history that held none of it.
Each lone surrogate now enters the session as U+FFFD: in the streamed text, the reply, a tool
call's arguments, the record and the log."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import trio

from tests.daemon_helpers import IO_TIMEOUT, DaemonHome, connect, running_daemon
from tests.providers.fake_servers import FakeModelServer, Reply, anthropic_stream, sse

#: What the model "says": a word with a lone low surrogate inside it.
SAID = "caf\udcff!"
SHOWN = "caf\ufffd!"


def glob_call(pattern: str) -> Reply:
    """A Messages stream whose one block is a Glob call with its input whole at its start
    (no ``input_json_delta``: the SDK parses that input itself)."""
    events = anthropic_stream([], stop_reason="tool_use")
    block = {"type": "tool_use", "id": "toolu_1", "name": "Glob", "input": {"pattern": pattern}}
    start = sse(
        {"type": "content_block_start", "index": 0, "content_block": block}, "content_block_start"
    )
    stop = sse({"type": "content_block_stop", "index": 0}, "content_block_stop")
    return Reply(events=[*events[:2], start, stop, *events[2:]])


async def test_a_lone_surrogate_from_the_model_enters_the_session_as_a_replacement(
    tmp_path: Path, server: FakeModelServer
) -> None:
    server.replies += [
        glob_call(SAID),
        Reply(events=anthropic_stream([{"text": ["caf", "\udcff", "!"]}])),
    ]
    home = DaemonHome(tmp_path / "home")
    home.write_config(server.provider_config("anthropic"))
    work = tmp_path / "work"
    work.mkdir()
    with running_daemon(home) as daemon, trio.fail_after(IO_TIMEOUT * 3):
        async with connect(daemon) as client:
            create = {"cwd": str(work), "provider": "fake", "sessionId": "s"}
            await client.call("session/create", create)
            await client.call("session/subscribe", {"sessionId": "s"})
            result = await client.call("session/run", {"sessionId": "s", "prompt": "look"})
            assert result["status"] == "completed", result
            assert result["response"] == SHOWN
            history = (await client.call("session/history", {"sessionId": "s"}))["messages"]
            calls: list[dict[str, Any]] = next(m for m in history if "toolCalls" in m)["toolCalls"]
            assert calls[0]["arguments"] == {"pattern": SHOWN}
            assert history[-1]["content"] == SHOWN
            deltas = [e["text"] for e in client.session_events("s") if e["type"] == "text_delta"]
            assert "".join(deltas) == SHOWN
            log = await client.call("session/log", {"sessionId": "s"})
            assert log.get("problems", []) == [], log
            again = await client.call("session/run", {"sessionId": "s", "prompt": "and?"})
            assert again["status"] == "completed", again
    assert "\\udcff" not in (home.state_dir / "sessions" / "s.json").read_text()
