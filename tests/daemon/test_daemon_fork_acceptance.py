"""Acceptance of branching conversations through a real robotad, beyond test_daemon_fork.py:
an exact middle prefix of a three-turn session, a turn on the fork leaving the source alone, a
chain of forks that survives a killed daemon, and a parked approval whose fork has every tool
call paired and nothing pending while the source keeps (and can still answer) its request.

The refusals (-32002 with data.messageId, -32001 while the source runs) are covered by
test_daemon_fork.py and not repeated here."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import trio

from tests.daemon_helpers import (
    IO_TIMEOUT,
    Client,
    DaemonHome,
    RunningDaemon,
    connect,
    module_daemon,
    running_daemon,
    start_robotad,
    stop_robotad,
)

daemon = module_daemon()


def stored_record(home: DaemonHome, session_id: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(home.record_path(session_id).read_bytes())["record"]
    return data


async def history(client: Client, session_id: str) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = (
        await client.call("session/history", {"sessionId": session_id})
    )["messages"]
    return messages


async def listed(client: Client) -> dict[str, dict[str, Any]]:
    return {s["sessionId"]: s for s in (await client.call("session/list"))["sessions"]}


async def three_turn_source(client: Client, cwd: Path) -> str:
    """A session that ran three turns (user, assistant ×3) with one scripted step left."""
    replies = ["first", "second", "third", "fourth", "fifth"]
    info = await client.call(
        "session/create", {"cwd": str(cwd), "script": [{"text": t} for t in replies]}
    )
    session_id: str = info["sessionId"]
    for prompt in ("one", "two", "three"):
        await client.call("session/run", {"sessionId": session_id, "prompt": prompt})
    return session_id


def assert_every_call_paired(messages: list[dict[str, Any]]) -> None:
    """Every toolCall id has exactly one tool result, after the message that requested it,
    and every tool result answers a requested call."""
    requested = {c["id"]: i for i, m in enumerate(messages) for c in m.get("toolCalls", [])}
    results = [(i, m["toolCallId"]) for i, m in enumerate(messages) if m["role"] == "tool"]
    assert Counter(call_id for _, call_id in results) == Counter(requested.keys())
    assert all(index > requested[call_id] for index, call_id in results)


async def test_a_fork_at_the_middle_of_three_turns_is_exactly_that_prefix(
    daemon: RunningDaemon, tmp_path: Path
) -> None:
    """PROTOCOL §5: forking a three-turn session at the second reply gives exactly the first
    four messages (same ids, same contents); a turn run on the fork appends to the fork only,
    and the source's history and its record file stay byte-for-byte what they were."""
    with trio.fail_after(IO_TIMEOUT):
        async with connect(daemon) as client:
            source = await three_turn_source(client, tmp_path)
            source_history = await history(client, source)
            source_bytes = daemon.home.record_path(source).read_bytes()
            middle = source_history[3]
            fork = await client.call(
                "session/fork", {"sessionId": source, "atMessageId": middle["id"]}
            )
            fork_id = fork["sessionId"]
            at_fork = await history(client, fork_id)
            reply = await client.call("session/run", {"sessionId": fork_id, "prompt": "branch"})
            fork_after = await history(client, fork_id)
            source_after = await history(client, source)
    assert [m["role"] for m in source_history] == ["user", "assistant"] * 3
    assert middle["content"] == "second"
    assert [m["id"] for m in at_fork] == [m["id"] for m in source_history[:4]]
    assert [m["content"] for m in at_fork] == ["one", "first", "two", "second"]
    assert at_fork == source_history[:4]
    assert (fork["messageCount"], fork["turnCount"]) == (4, 2)
    assert stored_record(daemon.home, fork_id)["forkedFrom"] == {
        "sessionId": source,
        "messageId": middle["id"],
    }
    assert reply["response"] == "fourth", "the fork continues the source's remaining script"
    assert fork_after[:4] == at_fork
    assert [m["content"] for m in fork_after[4:]] == ["branch", "fourth"]
    assert source_after == source_history
    assert daemon.home.record_path(source).read_bytes() == source_bytes


async def test_a_fork_of_a_fork_keeps_the_chain_through_a_killed_daemon(
    tmp_path_factory: pytest.TempPathFactory, tmp_path: Path
) -> None:
    """Forking a fork names the first fork in the second's forkedFrom and the source in the
    first's, on the records and in session/list; the second fork's history is the source's
    prefix, then the first fork's own messages. Each fork is durable when session/fork
    returns: after SIGKILL and a restart on the same state dir the chain, the records and the
    histories are unchanged."""
    home = DaemonHome(tmp_path_factory.mktemp("fork-chain"))
    first_daemon = start_robotad(home)
    try:
        with trio.fail_after(IO_TIMEOUT):
            async with connect(first_daemon) as client:
                source = await three_turn_source(client, tmp_path)
                source_history = await history(client, source)
                at = source_history[3]["id"]
                first = (
                    await client.call("session/fork", {"sessionId": source, "atMessageId": at})
                )["sessionId"]
                await client.call("session/run", {"sessionId": first, "prompt": "branch"})
                first_history = await history(client, first)
                at_first = first_history[4]["id"]
                second = (
                    await client.call(
                        "session/fork",
                        {"sessionId": first, "atMessageId": at_first, "newSessionId": "second"},
                    )
                )["sessionId"]
                second_history = await history(client, second)
                rows = await listed(client)
        records = {s: stored_record(home, s) for s in (source, first, second)}
        first_daemon.process.kill()
        first_daemon.process.wait()
    finally:
        stop_robotad(first_daemon)
    with running_daemon(home) as again:
        with trio.fail_after(IO_TIMEOUT):
            async with connect(again) as client:
                rows_again = await listed(client)
                second_again = await history(client, second)
    assert second == "second"
    assert records[first]["forkedFrom"] == {"sessionId": source, "messageId": at}
    assert records[second]["forkedFrom"] == {"sessionId": first, "messageId": at_first}
    assert "forkedFrom" not in records[source]
    assert (rows[first]["forkedFrom"], rows[second]["forkedFrom"]) == (source, first)
    assert "forkedFrom" not in rows[source]
    assert second_history == [*source_history[:4], first_history[4]]
    assert [stored_record(home, s) for s in (source, first, second)] == list(records.values())
    assert (rows_again[first]["forkedFrom"], rows_again[second]["forkedFrom"]) == (source, first)
    assert {rows_again[s]["status"] for s in (source, first, second)} == {"ok"}
    assert second_again == second_history


async def test_a_fork_of_a_parked_approval_has_every_call_paired_and_nothing_pending(
    daemon: RunningDaemon, tmp_path: Path
) -> None:
    """PROTOCOL §5: a session parked on a round of two calls (one needing approval) forks —
    whole, or at the requesting message — into histories where every toolCall id has exactly
    one tool result after it, each unanswered call closed as a failed "not carried over"
    result, and session/pending is null. The source keeps its pending execution and record
    unchanged, and answering it afterwards still completes it there while the forks'
    histories do not change."""
    readable = tmp_path / "notes.txt"
    readable.write_text("note\n")
    target = tmp_path / "w.txt"
    round_ = [
        {"name": "Read", "arguments": {"file_path": str(readable)}},
        {"name": "Write", "arguments": {"file_path": str(target), "content": "x"}},
    ]
    with trio.fail_after(IO_TIMEOUT):
        async with connect(daemon) as client:
            info = await client.call(
                "session/create",
                {"cwd": str(tmp_path), "script": [{"text": "hello"}, {"toolCalls": round_}]},
            )
            source = info["sessionId"]
            await client.call("session/run", {"sessionId": source, "prompt": "hi"})
            waiting = await client.call("session/run", {"sessionId": source, "prompt": "write"})
            source_history = await history(client, source)
            source_bytes = daemon.home.record_path(source).read_bytes()
            request_message = next(m for m in source_history if m.get("toolCalls"))
            whole = (await client.call("session/fork", {"sessionId": source}))["sessionId"]
            cut = (
                await client.call(
                    "session/fork", {"sessionId": source, "atMessageId": request_message["id"]}
                )
            )["sessionId"]
            forks = {f: await history(client, f) for f in (whole, cut)}
            pending = {f: await client.call("session/pending", {"sessionId": f}) for f in forks}
            source_pending = await client.call("session/pending", {"sessionId": source})
            source_bytes_after_forks = daemon.home.record_path(source).read_bytes()
            request = waiting["requests"][0]
            resumed = await client.call(
                "session/resume",
                {
                    "sessionId": source,
                    "executionId": waiting["executionId"],
                    "responses": [
                        {"requestId": request["requestId"], "responseId": "r1", "approved": True}
                    ],
                },
            )
            forks_after = {f: await history(client, f) for f in forks}
    assert waiting["status"] == "waiting"
    assert request["tool"] == "Write"
    calls = [c["id"] for c in request_message["toolCalls"]]
    for fork_id, messages in forks.items():
        assert_every_call_paired(messages)
        closed = [m for m in messages if m["role"] == "tool" and m["metadata"]["ok"] is False]
        assert closed, "the unanswered call is closed as failed, never dropped or run"
        assert all(m["content"].startswith("not carried over") for m in closed)
        assert {m["toolCallId"] for m in messages if m["role"] == "tool"} == set(calls)
        assert pending[fork_id] == {"pending": None}
    assert (
        forks[cut][: source_history.index(request_message) + 1]
        == source_history[: source_history.index(request_message) + 1]
    )
    assert source_pending["pending"]["executionId"] == waiting["executionId"]
    assert source_bytes_after_forks == source_bytes
    assert resumed["status"] == "completed"
    assert target.read_text() == "x"
    assert forks_after == forks
