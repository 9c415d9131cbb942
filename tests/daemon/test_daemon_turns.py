"""Turns end to end through a real robotad: run (waiting or not), turnId idempotency, turns
that outlive their requester, abort, provider failures, compaction, history, context and the
prompt history (one daemon for the module; scripted provider steps set the pace)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import trio

from protocol.errors import (
    CompactionAborted,
    CompactionFailed,
    InvalidParams,
    ProviderFailed,
    SessionBusy,
    TurnAborted,
)
from tests.daemon_helpers import IO_TIMEOUT, Client, RunningDaemon, connect, module_daemon

daemon = module_daemon()

#: A turn that streams for about five seconds: long enough to act on while it runs.
LONG_STEP = {"text": "x" * 50, "chunks": 50, "delayMs": 100}
#: A turn that streams for about a third of a second, then completes.
SHORT_STEP = {"text": "abcd", "chunks": 4, "delayMs": 80}


async def create(client: Client, cwd: Path, *steps: dict[str, Any], **extra: Any) -> str:
    params: dict[str, Any] = {"cwd": str(cwd), **extra}
    if steps:
        params["script"] = list(steps)
    info = await client.call("session/create", params)
    session_id: str = info["sessionId"]
    return session_id


async def test_run_waits_for_the_completed_turn(daemon: RunningDaemon, tmp_path: Path) -> None:
    """G-010: by the time session/run returns a completed turn, history (and the stored
    record) hold it; the caller was subscribed and saw the turn's events in seq order."""
    with trio.fail_after(IO_TIMEOUT):
        async with connect(daemon) as client:
            session_id = await create(client, tmp_path, {"text": "hello world", "chunks": 3})
            result = await client.call(
                "session/run", {"sessionId": session_id, "prompt": "hi", "turnId": "t-1"}
            )
            record = daemon.home.record_path(session_id)
            stored = json.loads(record.read_bytes())["record"]  # read before anything else
            info = await client.call("session/get", {"sessionId": session_id})
            await client.wait_for_event(session_id, "turn_finished")
    assert stored["turnCount"] == 1
    assert [(m["role"], m["content"]) for m in stored["messages"]] == [
        ("user", "hi"),
        ("assistant", "hello world"),
    ]
    assert result == {
        "turnId": "t-1",
        "status": "completed",
        "response": "hello world",
        "stopReason": "end",
    }
    assert (info["messageCount"], info["turnCount"], info["running"]) == (2, 1, False)
    events = client.session_events(session_id)
    assert [e["seq"] for e in events] == sorted(e["seq"] for e in events)
    kinds = [e["type"] for e in events]
    assert kinds[0] == "turn_started"
    assert kinds[-1] == "turn_finished"
    assert "".join(e["text"] for e in events if e["type"] == "text_delta") == "hello world"
    assert all(e["turnId"] == "t-1" for e in events)
    assert events[-1]["status"] == "completed"
    assert events[-1]["response"] == "hello world"


async def test_run_without_waiting_reports_through_turn_finished(
    daemon: RunningDaemon, tmp_path: Path
) -> None:
    """PROTOCOL §5: wait:false answers {turnId, status:"running"} at once; the result
    arrives as turn_finished."""
    with trio.fail_after(IO_TIMEOUT):
        async with connect(daemon) as client:
            session_id = await create(client, tmp_path, SHORT_STEP)
            started = await client.call(
                "session/run", {"sessionId": session_id, "prompt": "go", "wait": False}
            )
            finished = await client.wait_for_event(session_id, "turn_finished")
    assert started["status"] == "running"
    assert set(started) == {"turnId", "status"}
    assert finished["turnId"] == started["turnId"]
    assert finished["status"] == "completed"
    assert finished["response"] == "abcd"


async def test_a_known_turn_id_attaches_instead_of_starting_another(
    daemon: RunningDaemon, tmp_path: Path
) -> None:
    """G-071: session/run with a turnId the session has seen attaches to that turn while it
    runs, or returns its result, instead of starting another turn."""
    with trio.fail_after(IO_TIMEOUT):
        async with connect(daemon) as client:
            session_id = await create(client, tmp_path, SHORT_STEP)
            run = {"sessionId": session_id, "prompt": "once", "turnId": "same"}
            first = await client.call("session/run", {**run, "wait": False})
            attached = await client.call("session/run", run)
            again = await client.call("session/run", run)
            no_wait = await client.call("session/run", {**run, "wait": False})
            history = await client.call("session/history", {"sessionId": session_id})
    assert first == {"turnId": "same", "status": "running"}
    assert attached == {
        "turnId": "same",
        "status": "completed",
        "response": "abcd",
        "stopReason": "end",
    }
    assert again == attached == no_wait
    assert [m["content"] for m in history["messages"]] == ["once", "abcd"]
    assert len(client.session_events(session_id)) == len(
        {e["seq"] for e in client.session_events(session_id)}
    )
    assert sum(e["type"] == "turn_started" for e in client.session_events(session_id)) == 1


async def test_cancelling_the_run_request_never_stops_the_turn(
    daemon: RunningDaemon, tmp_path: Path
) -> None:
    """G-072: cancelling a session/run request stops only the waiting; the turn completes and
    the connection stays subscribed."""
    with trio.fail_after(IO_TIMEOUT):
        async with connect(daemon) as client:
            session_id = await create(client, tmp_path, SHORT_STEP)
            async with trio.open_nursery() as nursery:
                cancel = trio.CancelScope()

                async def waiting_run() -> None:
                    with cancel:
                        await client.call("session/run", {"sessionId": session_id, "prompt": "p"})
                    assert cancel.cancelled_caught

                nursery.start_soon(waiting_run)
                await client.wait_for_event(session_id, "text_delta")
                cancel.cancel()
            finished = await client.wait_for_event(session_id, "turn_finished")
            history = await client.call("session/history", {"sessionId": session_id})
    assert finished["status"] == "completed"
    assert [m["content"] for m in history["messages"]] == ["p", "abcd"]


async def test_a_turn_continues_after_its_client_disconnects(
    daemon: RunningDaemon, tmp_path: Path
) -> None:
    """G-072: closing the connection that started a turn never stops the turn."""
    with trio.fail_after(IO_TIMEOUT):
        async with connect(daemon) as watcher:
            async with connect(daemon) as requester:
                session_id = await create(requester, tmp_path, SHORT_STEP)
                await watcher.call("session/subscribe", {"sessionId": session_id})
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(
                        requester.call, "session/run", {"sessionId": session_id, "prompt": "bye"}
                    )
                    await watcher.wait_for_event(session_id, "text_delta")
                    nursery.cancel_scope.cancel()
            finished = await watcher.wait_for_event(session_id, "turn_finished")
            info = await watcher.call("session/get", {"sessionId": session_id})
    assert finished["status"] == "completed"
    assert info["turnCount"] == 1


async def test_busy_abort_and_aborted_turn(daemon: RunningDaemon, tmp_path: Path) -> None:
    """G-193 and PROTOCOL §3: a run while a turn runs is SessionBusy (-32001) naming the
    holder; abort answers aborted:true and the waiting run fails with TurnAborted (-32006)
    once the turn has stopped; abort with nothing running answers aborted:false."""
    with trio.fail_after(IO_TIMEOUT):
        async with connect(daemon) as client:
            session_id = await create(client, tmp_path, LONG_STEP)
            outcome: dict[str, Any] = {}
            async with trio.open_nursery() as nursery:

                async def waiting_run() -> None:
                    try:
                        await client.call(
                            "session/run",
                            {"sessionId": session_id, "prompt": "long", "turnId": "holder"},
                        )
                    except TurnAborted as exc:
                        outcome["error"] = exc

                nursery.start_soon(waiting_run)
                await client.wait_for_event(session_id, "text_delta")
                with pytest.raises(SessionBusy) as busy:
                    await client.call("session/run", {"sessionId": session_id, "prompt": "no"})
                running = await client.call("session/get", {"sessionId": session_id})
                aborted = await client.call("session/abort", {"sessionId": session_id})
            finished = await client.wait_for_event(session_id, "turn_finished")
            idle = await client.call("session/abort", {"sessionId": session_id})
            after = await client.call("session/get", {"sessionId": session_id})
    assert busy.value.data == {"sessionId": session_id, "turnId": "holder"}
    assert running["running"] is True
    assert aborted == {"aborted": True}
    assert outcome["error"].data == {"sessionId": session_id, "turnId": "holder"}
    assert finished["status"] == "aborted"
    assert idle == {"aborted": False}
    assert after["running"] is False
    assert after["turnCount"] == 0


async def test_provider_failure_keeps_history_and_names_the_provider(
    daemon: RunningDaemon, tmp_path: Path
) -> None:
    """PROTOCOL §3: a failed model call is ProviderFailed (-32007) with {sessionId, turnId,
    provider, reason}; history up to the failure is kept."""
    with trio.fail_after(IO_TIMEOUT):
        async with connect(daemon) as client:
            session_id = await create(client, tmp_path, {"error": "upstream is down"})
            with pytest.raises(ProviderFailed) as failed:
                await client.call(
                    "session/run", {"sessionId": session_id, "prompt": "try", "turnId": "f1"}
                )
            finished = await client.wait_for_event(session_id, "turn_finished")
            history = await client.call("session/history", {"sessionId": session_id})
            ok = await client.call("session/run", {"sessionId": session_id, "prompt": "next"})
    assert failed.value.data == {
        "sessionId": session_id,
        "turnId": "f1",
        "provider": "scripted",
        "reason": "upstream is down",
    }
    assert finished["status"] == "failed"
    assert finished["error"]["code"] == -32007
    assert [m["content"] for m in history["messages"]] == ["try"]
    assert ok["response"] == "echo: next"


async def test_history_pages_and_context(daemon: RunningDaemon, tmp_path: Path) -> None:
    """PROTOCOL §5: session/history {total, messages} pages by offset/limit with total the
    whole history; session/context is a ContextState."""
    with trio.fail_after(IO_TIMEOUT):
        async with connect(daemon) as client:
            session_id = await create(client, tmp_path)
            for prompt in ("a", "b", "c"):
                await client.call("session/run", {"sessionId": session_id, "prompt": prompt})
            whole = await client.call("session/history", {"sessionId": session_id})
            page = await client.call(
                "session/history", {"sessionId": session_id, "offset": 1, "limit": 2}
            )
            beyond = await client.call("session/history", {"sessionId": session_id, "offset": 9})
            context = await client.call("session/context", {"sessionId": session_id})
            with pytest.raises(InvalidParams) as bad:
                await client.call("session/history", {"sessionId": session_id, "offset": -1})
    assert whole["total"] == 6
    assert [m["content"] for m in whole["messages"]] == [
        "a",
        "echo: a",
        "b",
        "echo: b",
        "c",
        "echo: c",
    ]
    assert page == {"total": 6, "messages": whole["messages"][1:3]}
    assert beyond == {"total": 6, "messages": []}
    assert set(context) == {"usedTokens", "maxTokens", "usedPercentage", "remainingPercentage"}
    assert context["usedTokens"] > 0
    assert [i["path"] for i in bad.value.issues] == ["$.offset"]


async def test_compaction_outcomes(daemon: RunningDaemon, tmp_path: Path) -> None:
    """PROTOCOL §5/§3: session/compact {compacted, before, after}; nothing to summarise is
    compacted:false; an empty summary is CompactionFailed (-32008) and an abort during the
    summary CompactionAborted (-32009), both {sessionId, trigger} and history untouched."""
    with trio.fail_after(IO_TIMEOUT):
        async with connect(daemon) as client:
            empty = await create(client, tmp_path)
            nothing = await client.call("session/compact", {"sessionId": empty})

            session_id = await create(
                client,
                tmp_path,
                {"text": "first"},
                {"summary": ""},
                {"summary": "late", "delayMs": 5000},
            )
            await client.call("session/run", {"sessionId": session_id, "prompt": "one"})
            before = await client.call("session/history", {"sessionId": session_id})
            with pytest.raises(CompactionFailed) as failed:
                await client.call("session/compact", {"sessionId": session_id})
            outcome: dict[str, Any] = {}
            async with trio.open_nursery() as nursery:

                async def compact() -> None:
                    try:
                        await client.call("session/compact", {"sessionId": session_id})
                    except CompactionAborted as exc:
                        outcome["error"] = exc

                nursery.start_soon(compact)
                await client.wait_for(
                    lambda events: (
                        sum(
                            e.get("type") == "compaction"
                            and e.get("phase") == "started"
                            and e.get("sessionId") == session_id
                            for e in events
                        )
                        == 2
                    )
                )
                assert await client.call("session/abort", {"sessionId": session_id}) == {
                    "aborted": True
                }
            untouched = await client.call("session/history", {"sessionId": session_id})
            done = await client.call(
                "session/compact", {"sessionId": session_id, "instructions": "keep names"}
            )
            after = await client.call("session/history", {"sessionId": session_id})
    assert nothing["compacted"] is False
    assert nothing["before"] == nothing["after"]
    assert failed.value.data == {"sessionId": session_id, "trigger": "manual"}
    assert outcome["error"].data == {"sessionId": session_id, "trigger": "manual"}
    assert untouched == before
    assert done["compacted"] is True
    assert set(done["before"]) == set(done["after"]) == set(nothing["before"])
    assert after["total"] == 1
    assert after["messages"][0]["metadata"]["compaction"]["trigger"] == "manual"


async def test_prompt_history_records_submitted_prompts_only(
    daemon: RunningDaemon, tmp_path: Path
) -> None:
    """G-164, G-165, G-166: each prompt of session/run is one {prompt, sessionId, cwd,
    timestamp} entry; compaction instructions add none; history/search finds them across
    sessions newest first, narrowed by query and cwd."""
    other = tmp_path / "other"
    other.mkdir()
    with trio.fail_after(IO_TIMEOUT):
        async with connect(daemon) as client:
            first = await create(client, tmp_path)
            second = await create(client, other)
            await client.call("session/run", {"sessionId": first, "prompt": "zebra one"})
            await client.call("session/run", {"sessionId": second, "prompt": "zebra two"})
            await client.call(
                "session/compact", {"sessionId": first, "instructions": "zebra secret"}
            )
            found = await client.call("history/search", {"query": "ZEBRA"})
            narrowed = await client.call("history/search", {"query": "zebra", "cwd": str(other)})
            limited = await client.call("history/search", {"query": "zebra", "limit": 1})
    entries = found["entries"]
    assert [e["prompt"] for e in entries] == ["zebra two", "zebra one"]
    assert entries[0]["sessionId"] == second
    assert entries[0]["cwd"] == str(other)
    assert entries[1]["sessionId"] == first
    assert entries[1]["cwd"] == str(tmp_path)
    assert all(set(e) == {"prompt", "sessionId", "cwd", "timestamp"} for e in entries)
    assert all(e["timestamp"].endswith("Z") for e in entries)
    assert found["unreadableLines"] == 0
    assert [e["prompt"] for e in narrowed["entries"]] == ["zebra two"]
    assert [e["prompt"] for e in limited["entries"]] == ["zebra two"]


async def test_one_sessions_slowness_or_failure_never_touches_another(
    daemon: RunningDaemon, tmp_path: Path
) -> None:
    """Sessions are independent: while one runs a long turn, another runs turns to completion
    (its events carry only its own id), and a failing session leaves the others working."""
    with trio.fail_after(IO_TIMEOUT):
        async with connect(daemon) as client:
            slow = await create(client, tmp_path, LONG_STEP)
            quick = await create(client, tmp_path, {"text": "fast"})
            broken = await create(client, tmp_path, {"error": "no model"})
            await client.call("session/run", {"sessionId": slow, "prompt": "s", "wait": False})
            await client.wait_for_event(slow, "text_delta")
            done = await client.call("session/run", {"sessionId": quick, "prompt": "q"})
            with pytest.raises(ProviderFailed):
                await client.call("session/run", {"sessionId": broken, "prompt": "b"})
            again = await client.call("session/run", {"sessionId": quick, "prompt": "r"})
            slow_info = await client.call("session/get", {"sessionId": slow})
            await client.call("session/abort", {"sessionId": slow})
            await client.wait_for_event(slow, "turn_finished")
    assert done["response"] == "fast"
    assert again["response"] == "echo: r"
    assert slow_info["running"] is True
    quick_events = client.session_events(quick)
    assert {e["turnId"] for e in quick_events} == {done["turnId"], again["turnId"]}


async def test_a_cancelled_run_is_answered_request_cancelled_at_once(
    daemon: RunningDaemon, tmp_path: Path
) -> None:
    """PROTOCOL §2, G-072 on the wire: $/cancelRequest of a waiting session/run is answered
    -32800 while the turn still runs; the connection stays subscribed and later receives the
    turn's turn_finished."""
    with trio.fail_after(IO_TIMEOUT):
        async with connect(daemon) as client:
            session_id = await create(client, tmp_path, SHORT_STEP)
        stream = await trio.open_unix_socket(str(daemon.socket_path))
        run = {
            "jsonrpc": "2.0",
            "id": 7,
            "method": "session/run",
            "params": {"sessionId": session_id, "prompt": "cancel me"},
        }
        cancel = {"jsonrpc": "2.0", "method": "$/cancelRequest", "params": {"id": 7}}
        await stream.send_all(json.dumps(run).encode() + b"\n")
        received: list[dict[str, Any]] = []
        buffer = b""
        cancelled = False
        while not any(m.get("params", {}).get("type") == "turn_finished" for m in received):
            chunk = await stream.receive_some(1 << 16)
            assert chunk, "the daemon closed the connection"
            buffer += chunk
            *lines, buffer = buffer.split(b"\n")
            received.extend(json.loads(line) for line in lines if line.strip())
            if not cancelled and any(
                m.get("params", {}).get("type") == "text_delta" for m in received
            ):
                await stream.send_all(json.dumps(cancel).encode() + b"\n")
                cancelled = True
        await stream.aclose()
    replies = [m for m in received if m.get("id") == 7]
    assert len(replies) == 1
    assert set(replies[0]) == {"jsonrpc", "id", "error"}
    assert replies[0]["error"]["code"] == -32800
    reply_at = received.index(replies[0])
    finished_at = next(
        i for i, m in enumerate(received) if m.get("params", {}).get("type") == "turn_finished"
    )
    assert reply_at < finished_at
    assert received[finished_at]["params"]["status"] == "completed"
