"""Round limits end to end (PROTOCOL §10.2): ``maxRounds`` on session/create and session/run,
the configured default, ``stopReason`` on completed turns and ``turn_finished``, SessionInfo,
continuations of a parked turn, persistence, and refusals (one daemon for the module, its
config setting ``[defaults] max_rounds = 2``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import trio

from protocol.errors import InvalidParams
from tests.daemon_helpers import IO_TIMEOUT, Client, RunningDaemon, connect, module_daemon

daemon = module_daemon(config="[defaults]\nmax_rounds = 2\n")


def read_step(path: Path, text: str = "") -> dict[str, Any]:
    """A scripted reply that calls Read (allowed in default mode) on `path`."""
    step: dict[str, Any] = {"toolCalls": [{"name": "Read", "arguments": {"file_path": str(path)}}]}
    if text:
        step["text"] = text
    return step


async def create(client: Client, cwd: Path, steps: list[dict[str, Any]], **extra: Any) -> Any:
    return await client.call("session/create", {"cwd": str(cwd), "script": steps, **extra})


async def history(client: Client, session_id: str) -> list[dict[str, Any]]:
    result = await client.call("session/history", {"sessionId": session_id})
    messages: list[dict[str, Any]] = result["messages"]
    return messages


def assert_paired(messages: list[dict[str, Any]]) -> None:
    """Every tool call has its result."""
    calls = [c["id"] for m in messages if m["role"] == "assistant" for c in m.get("toolCalls", [])]
    results = [m["toolCallId"] for m in messages if m["role"] == "tool"]
    assert calls == results


@pytest.fixture
def note(tmp_path: Path) -> Path:
    path = tmp_path / "note.txt"
    path.write_text("a note\n")
    return path


async def test_a_turn_stops_at_the_sessions_limit_with_every_call_answered(
    daemon: RunningDaemon, tmp_path: Path, note: Path
) -> None:
    steps = [read_step(note, f"round {n}") for n in range(6)]
    with trio.fail_after(IO_TIMEOUT):
        async with connect(daemon) as client:
            info = await create(client, tmp_path, steps, maxRounds=3)
            session_id = info["sessionId"]
            result = await client.call("session/run", {"sessionId": session_id, "prompt": "go"})
            finished = await client.wait_for_event(session_id, "turn_finished")
            messages = await history(client, session_id)
            after = await client.call("session/get", {"sessionId": session_id})
    assert info["maxRounds"] == 3
    assert result["status"] == "completed"
    assert result["stopReason"] == "maxRounds"
    assert result["response"] == "round 2"
    assert (finished["status"], finished["stopReason"]) == ("completed", "maxRounds")
    assert [m["role"] for m in messages] == ["user"] + ["assistant", "tool"] * 3
    assert_paired(messages)
    assert all(m["metadata"]["ok"] for m in messages if m["role"] == "tool")
    assert (after["turnCount"], after["running"]) == (1, False)


async def test_the_configured_default_applies_when_create_names_none(
    daemon: RunningDaemon, tmp_path: Path, note: Path
) -> None:
    with trio.fail_after(IO_TIMEOUT):
        async with connect(daemon) as client:
            info = await create(client, tmp_path, [read_step(note) for _ in range(5)])
            session_id = info["sessionId"]
            result = await client.call("session/run", {"sessionId": session_id, "prompt": "go"})
            messages = await history(client, session_id)
    assert info["maxRounds"] == 2
    assert result["stopReason"] == "maxRounds"
    assert sum(m["role"] == "assistant" for m in messages) == 2


async def test_session_run_overrides_the_limit_for_that_turn_only(
    daemon: RunningDaemon, tmp_path: Path, note: Path
) -> None:
    steps = [read_step(note), read_step(note), {"text": "finished"}, read_step(note, "again")]
    with trio.fail_after(IO_TIMEOUT):
        async with connect(daemon) as client:
            session_id = (await create(client, tmp_path, steps, maxRounds=1))["sessionId"]
            first = await client.call(
                "session/run", {"sessionId": session_id, "prompt": "a", "maxRounds": 5}
            )
            second = await client.call("session/run", {"sessionId": session_id, "prompt": "b"})
            info = await client.call("session/get", {"sessionId": session_id})
    # The first turn used the override: two tool rounds, then a reply that ends it.
    assert (first["stopReason"], first["response"]) == ("end", "finished")
    # The next turn is back at the session's limit (one round), and stops there.
    assert (second["stopReason"], second["response"]) == ("maxRounds", "again")
    assert info["maxRounds"] == 1


async def test_a_turn_that_ends_normally_says_end(daemon: RunningDaemon, tmp_path: Path) -> None:
    with trio.fail_after(IO_TIMEOUT):
        async with connect(daemon) as client:
            session_id = (await create(client, tmp_path, [{"text": "hi"}]))["sessionId"]
            result = await client.call("session/run", {"sessionId": session_id, "prompt": "x"})
            finished = await client.wait_for_event(session_id, "turn_finished")
    assert result == {
        "turnId": result["turnId"],
        "status": "completed",
        "response": "hi",
        "stopReason": "end",
    }
    assert finished["stopReason"] == "end"


async def test_a_resumed_turn_counts_its_earlier_rounds_against_its_limit(
    daemon: RunningDaemon, tmp_path: Path
) -> None:
    """A turn run with maxRounds 1 parks on its first round's Write; once approved, the Write
    runs and the turn completes at its limit without calling the model again."""
    target = tmp_path / "out.txt"
    write = {
        "toolCalls": [{"name": "Write", "arguments": {"file_path": str(target), "content": "x"}}]
    }
    steps = [write, {"text": "never sent"}]
    with trio.fail_after(IO_TIMEOUT):
        async with connect(daemon) as client:
            session_id = (await create(client, tmp_path, steps, maxRounds=5))["sessionId"]
            waiting = await client.call(
                "session/run", {"sessionId": session_id, "prompt": "w", "maxRounds": 1}
            )
            request = waiting["requests"][0]
            resumed = await client.call(
                "session/resume",
                {
                    "sessionId": session_id,
                    "executionId": waiting["executionId"],
                    "responses": [
                        {"requestId": request["requestId"], "responseId": "r1", "approved": True}
                    ],
                },
            )
            messages = await history(client, session_id)
    assert waiting["status"] == "waiting"
    assert (resumed["status"], resumed["stopReason"]) == ("completed", "maxRounds")
    assert target.read_text() == "x"
    assert [m["role"] for m in messages] == ["user", "assistant", "tool"]
    assert_paired(messages)


async def test_the_limit_survives_a_reload(daemon: RunningDaemon, tmp_path: Path) -> None:
    with trio.fail_after(IO_TIMEOUT):
        async with connect(daemon) as client:
            session_id = (await create(client, tmp_path, [], maxRounds=4))["sessionId"]
            await client.call("session/close", {"sessionId": session_id})
            reopened = await client.call("session/open", {"sessionId": session_id})
    assert reopened["maxRounds"] == 4


async def test_a_limit_below_one_is_refused_where_it_is_given(
    daemon: RunningDaemon, tmp_path: Path
) -> None:
    with trio.fail_after(IO_TIMEOUT):
        async with connect(daemon) as client:
            with pytest.raises(InvalidParams) as at_create:
                await create(client, tmp_path, [], maxRounds=0)
            session_id = (await create(client, tmp_path, []))["sessionId"]
            with pytest.raises(InvalidParams) as at_run:
                await client.call(
                    "session/run", {"sessionId": session_id, "prompt": "x", "maxRounds": -1}
                )
    assert [i["path"] for i in at_create.value.issues] == ["$.maxRounds"]
    assert [i["path"] for i in at_run.value.issues] == ["$.maxRounds"]
