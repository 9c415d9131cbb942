"""A summary reply that is no whole summary, through a real robotad and the official SDKs
(architecture decision 63).

A compaction replaces the history for good. A summary the server cut off at the reply's token
budget (Anthropic ``max_tokens``, OpenAI-compatible ``length``) stops mid-sentence, and one
from a reply that called a tool is what the model said before acting; both used to replace the
whole history, answered ``compacted: true``. They are CompactionFailed now, saying why, with
history, record and log as they were, and the session compacts on the next good reply.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import trio

from protocol.errors import CompactionFailed
from tests.daemon_helpers import IO_TIMEOUT, DaemonHome, connect, running_daemon
from tests.providers.fake_servers import FakeModelServer, Reply, anthropic_stream, openai_stream

#: What the summariser writes before the server cuts it off, or before it calls a tool.
CUT = "The user asked for a parser. Decisions so far:"
BEFORE_ACTING = "Let me read the file first."
WHOLE = "The user asked for a parser; it is written and its tests pass."


def replies(kind: str, odd: str) -> list[Reply]:
    """A turn's reply, the odd summary reply, then a whole summary, in `kind`'s wire form."""
    if kind == "anthropic":
        read = ("toolu_1", "Read", ['{"file_path": "a.txt"}'])
        summaries = {
            "cut": anthropic_stream([{"text": [CUT]}], stop_reason="max_tokens"),
            "calls": anthropic_stream(
                [{"text": [BEFORE_ACTING]}, {"tool_use": read}], stop_reason="tool_use"
            ),
        }
        turn = anthropic_stream([{"text": ["hello there"]}])
        whole = anthropic_stream([{"text": [WHOLE]}])
    else:
        call = {"index": 0, "id": "c1", "type": "function"}
        call["function"] = {"name": "Read", "arguments": '{"file_path": "a.txt"}'}
        summaries = {
            "cut": openai_stream([CUT], finish_reason="length"),
            "calls": openai_stream(
                [BEFORE_ACTING], tool_deltas=[[call]], finish_reason="tool_calls"
            ),
        }
        turn = openai_stream(["hello there"])
        whole = openai_stream([WHOLE])
    return [Reply(events=turn), Reply(events=summaries[odd]), Reply(events=whole)]


@pytest.mark.parametrize("kind", ["anthropic", "openai"])
@pytest.mark.parametrize(
    ("odd", "reason"),
    [
        ("cut", "the summary was cut off at the model's output limit"),
        ("calls", "the model called a tool instead of writing a summary"),
    ],
)
async def test_a_reply_that_is_no_whole_summary_compacts_nothing(
    tmp_path: Path, server: FakeModelServer, kind: str, odd: str, reason: str
) -> None:
    server.replies += replies(kind, odd)
    home = DaemonHome(tmp_path / "home")
    home.write_config(server.provider_config(kind, model="m"))
    work = tmp_path / "work"
    work.mkdir()
    with running_daemon(home) as daemon, trio.fail_after(IO_TIMEOUT * 3):
        async with connect(daemon) as client:
            create = {"cwd": str(work), "provider": "fake", "sessionId": "s"}
            await client.call("session/create", create)
            await client.call("session/run", {"sessionId": "s", "prompt": "write a parser"})
            before: dict[str, Any] = await client.call("session/history", {"sessionId": "s"})
            record = home.record_path("s").read_bytes()
            with pytest.raises(CompactionFailed) as failed:
                await client.call("session/compact", {"sessionId": "s"})
            after = await client.call("session/history", {"sessionId": "s"})
            stored = home.record_path("s").read_bytes()
            log = await client.call("session/log", {"sessionId": "s"})
            phases = [e["phase"] for e in client.session_events("s") if e["type"] == "compaction"]
            compacted = await client.call("session/compact", {"sessionId": "s"})
            summary = (await client.call("session/history", {"sessionId": "s"}))["messages"][-1]
    assert failed.value.data == {"sessionId": "s", "trigger": "manual"}
    assert reason in failed.value.message
    assert after == before
    assert stored == record
    assert (log["complete"], log["problems"]) == (True, [])
    assert phases == ["started", "failed"]
    assert compacted["compacted"] is True
    assert summary["content"] == WHOLE
