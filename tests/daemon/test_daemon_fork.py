"""session/fork end to end through a real robotad: the cut, the settings carried over, the
source left byte-for-byte alone, forkedFrom on the record and in session/list, and refusals."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import trio

from protocol.errors import SessionBusy, SessionExists, SessionNotFound
from robotad.daemon.fork import NOT_CARRIED_OVER
from tests.daemon_helpers import IO_TIMEOUT, Client, RunningDaemon, connect, module_daemon

daemon = module_daemon()


def record_of(daemon: RunningDaemon, session_id: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(daemon.home.record_path(session_id).read_bytes())["record"]
    return data


async def history(client: Client, session_id: str) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = (
        await client.call("session/history", {"sessionId": session_id})
    )["messages"]
    return messages


async def source_with_two_turns(client: Client, cwd: Path, **extra: Any) -> str:
    info = await client.call(
        "session/create",
        {
            "cwd": str(cwd),
            "permissionMode": "acceptEdits",
            "permissions": {"deny": ["Bash(rm:*)"]},
            "script": [{"text": "first"}, {"text": "second"}, {"text": "third"}],
            **extra,
        },
    )
    session_id: str = info["sessionId"]
    await client.call("session/addRule", {**_rule("Read(/tmp/**)"), "sessionId": session_id})
    for prompt in ("one", "two"):
        await client.call("session/run", {"sessionId": session_id, "prompt": prompt})
    return session_id


def _rule(rule: str) -> dict[str, str]:
    return {"rule": rule, "kind": "allow", "scope": "session"}


async def test_fork_takes_all_history_and_the_settings_and_leaves_the_source(
    daemon: RunningDaemon, tmp_path: Path
) -> None:
    """PROTOCOL §5: a fork without atMessageId holds the whole history, the same cwd,
    provider, model, mode and rules; the source record stays byte-for-byte unchanged; the new
    record has forkedFrom {sessionId, messageId} and session/list shows it."""
    with trio.fail_after(IO_TIMEOUT):
        async with connect(daemon) as client:
            source = await source_with_two_turns(client, tmp_path)
            await client.call("session/close", {"sessionId": source})
            before = daemon.home.record_path(source).read_bytes()
            source_history = await history(client, source)
            fork = await client.call("session/fork", {"sessionId": source})
            fork_id = fork["sessionId"]
            fork_history = await history(client, fork_id)
            rules = await client.call("session/addRule", {**_rule("Glob"), "sessionId": fork_id})
            reply = await client.call("session/run", {"sessionId": fork_id, "prompt": "three"})
            listed = {s["sessionId"]: s for s in (await client.call("session/list"))["sessions"]}
    assert daemon.home.record_path(source).read_bytes() == before
    assert fork_history == source_history
    assert fork_id != source
    assert (fork["cwd"], fork["provider"], fork["model"], fork["permissionMode"]) == (
        str(tmp_path),
        "scripted",
        "scripted",
        "acceptEdits",
    )
    assert (fork["messageCount"], fork["turnCount"]) == (4, 2)
    assert rules["deny"] == ["Bash(rm:*)"]
    assert rules["allow"] == ["Read(/tmp/**)", "Glob"]
    assert reply["response"] == "third", "the fork continues the source's remaining script"
    assert record_of(daemon, fork_id)["forkedFrom"] == {
        "sessionId": source,
        "messageId": source_history[-1]["id"],
    }
    assert listed[fork_id]["forkedFrom"] == source
    assert "forkedFrom" not in listed[source]


async def test_fork_at_a_message_cuts_there_under_the_chosen_id(
    daemon: RunningDaemon, tmp_path: Path
) -> None:
    """PROTOCOL §5: history up to and including atMessageId; newSessionId is used as is and a
    taken one is SessionExists; the source is untouched while loaded too."""
    with trio.fail_after(IO_TIMEOUT):
        async with connect(daemon) as client:
            source = await source_with_two_turns(client, tmp_path)
            source_history = await history(client, source)
            at = source_history[1]["id"]
            before = daemon.home.record_path(source).read_bytes()
            fork = await client.call(
                "session/fork", {"sessionId": source, "atMessageId": at, "newSessionId": "cut-1"}
            )
            with pytest.raises(SessionExists):
                await client.call("session/fork", {"sessionId": source, "newSessionId": "cut-1"})
            cut = await history(client, "cut-1")
            after_source = await history(client, source)
    assert fork["sessionId"] == "cut-1"
    assert cut == source_history[:2]
    assert (fork["messageCount"], fork["turnCount"]) == (2, 1)
    assert after_source == source_history
    assert daemon.home.record_path(source).read_bytes() == before
    assert record_of(daemon, "cut-1")["forkedFrom"] == {"sessionId": source, "messageId": at}


async def test_fork_at_a_tool_request_closes_its_calls_as_failed(
    daemon: RunningDaemon, tmp_path: Path
) -> None:
    """No open round is carried into a fork: a cut right after an assistant message that
    requested tools keeps that message and closes each of its calls with a failed result."""
    target = tmp_path / "notes.txt"
    target.write_text("note\n")
    call = {"name": "Read", "arguments": {"file_path": str(target)}}
    with trio.fail_after(IO_TIMEOUT):
        async with connect(daemon) as client:
            info = await client.call(
                "session/create",
                {"cwd": str(tmp_path), "script": [{"toolCalls": [call, call]}, {"text": "done"}]},
            )
            source = info["sessionId"]
            await client.call("session/run", {"sessionId": source, "prompt": "read it"})
            source_history = await history(client, source)
            request = next(m for m in source_history if m.get("toolCalls"))
            fork = await client.call(
                "session/fork", {"sessionId": source, "atMessageId": request["id"]}
            )
            forked = await history(client, fork["sessionId"])
            follow_up = await client.call(
                "session/run", {"sessionId": fork["sessionId"], "prompt": "again"}
            )
    assert [m["role"] for m in source_history] == ["user", "assistant", "tool", "tool", "assistant"]
    assert forked[:2] == source_history[:2]
    closing = forked[2:]
    assert [m["toolCallId"] for m in closing] == [c["id"] for c in request["toolCalls"]]
    for message in closing:
        assert message["role"] == "tool"
        assert message["metadata"]["ok"] is False
        assert message["content"] == NOT_CARRIED_OVER
    assert fork["turnCount"] == 0
    assert follow_up["status"] == "completed"


async def test_fork_refusals(daemon: RunningDaemon, tmp_path: Path) -> None:
    """PROTOCOL §5: an unknown atMessageId is -32002 with data.messageId; a source running a
    turn is -32001; nothing is created either way."""
    with trio.fail_after(IO_TIMEOUT):
        async with connect(daemon) as client:
            info = await client.call(
                "session/create",
                {
                    "cwd": str(tmp_path),
                    "script": [{"text": "x" * 40, "chunks": 40, "delayMs": 100}],
                },
            )
            source = info["sessionId"]
            with pytest.raises(SessionNotFound) as unknown:
                await client.call("session/fork", {"sessionId": source, "atMessageId": "m-nope"})
            await client.call(
                "session/run",
                {"sessionId": source, "prompt": "slow", "turnId": "busy-1", "wait": False},
            )
            await client.wait_for_event(source, "text_delta")
            with pytest.raises(SessionBusy) as busy:
                await client.call("session/fork", {"sessionId": source, "newSessionId": "nope"})
            await client.call("session/abort", {"sessionId": source})
            await client.wait_for_event(source, "turn_finished")
            with pytest.raises(SessionNotFound):
                await client.call("session/get", {"sessionId": "nope"})
    assert unknown.value.data == {"sessionId": source, "messageId": "m-nope"}
    assert busy.value.data == {"sessionId": source, "turnId": "busy-1"}


async def test_a_parked_execution_is_not_carried_into_a_fork(
    daemon: RunningDaemon, tmp_path: Path
) -> None:
    """PROTOCOL §5: forking a session whose execution waits for approval gives a fork with
    nothing pending (the open round's calls closed as failed) that accepts a run at once,
    while the source still waits with its request untouched."""
    call = {"name": "Write", "arguments": {"file_path": str(tmp_path / "w.txt"), "content": "x"}}
    with trio.fail_after(IO_TIMEOUT):
        async with connect(daemon) as client:
            info = await client.call(
                "session/create", {"cwd": str(tmp_path), "script": [{"toolCalls": [call]}]}
            )
            source = info["sessionId"]
            waiting = await client.call("session/run", {"sessionId": source, "prompt": "write"})
            before = daemon.home.record_path(source).read_bytes()
            fork = await client.call("session/fork", {"sessionId": source})
            forked = await history(client, fork["sessionId"])
            run = await client.call("session/run", {"sessionId": fork["sessionId"], "prompt": "go"})
            source_pending = await client.call("session/pending", {"sessionId": source})
    assert waiting["status"] == "waiting"
    assert fork["pending"] is None
    assert forked[-1]["role"] == "tool"
    assert forked[-1]["metadata"]["ok"] is False
    assert run["status"] == "completed"
    assert source_pending["pending"]["executionId"] == waiting["executionId"]
    assert daemon.home.record_path(source).read_bytes() == before
    assert not (tmp_path / "w.txt").exists()
