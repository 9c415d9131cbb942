"""Event streams end to end through a real robotad: fan-out to several clients, replay after a
reconnect, EventsLost, unsubscribe, and a subscriber that never reads (one daemon with a small
replay buffer for the module)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import trio

from protocol.errors import EventsLost
from tests.daemon_helpers import (
    IO_TIMEOUT,
    Client,
    Event,
    RunningDaemon,
    connect,
    module_daemon,
)

BUFFER = 40
daemon = module_daemon("--event-buffer", str(BUFFER))


async def create(client: Client, cwd: Path, *steps: dict[str, Any]) -> str:
    params: dict[str, Any] = {"cwd": str(cwd)}
    if steps:
        params["script"] = list(steps)
    session_id: str = (await client.call("session/create", params))["sessionId"]
    return session_id


def seqs(events: list[Event]) -> list[int]:
    return [e["seq"] for e in events]


async def test_two_subscribers_see_every_event_in_order(
    daemon: RunningDaemon, tmp_path: Path
) -> None:
    """PROTOCOL §6: every subscriber of a session receives every event, seq strictly
    increasing and without gaps, the same sequence for all."""
    with trio.fail_after(IO_TIMEOUT):
        async with connect(daemon) as first, connect(daemon) as second:
            session_id = await create(first, tmp_path, {"text": "abcdefgh", "chunks": 8})
            await first.call("session/subscribe", {"sessionId": session_id})
            await second.call("session/subscribe", {"sessionId": session_id})
            await first.call("session/run", {"sessionId": session_id, "prompt": "p"})
            await second.wait_for_event(session_id, "turn_finished")
            await first.wait_for_event(session_id, "turn_finished")
    one, two = first.session_events(session_id), second.session_events(session_id)
    assert one == two
    assert seqs(one) == list(range(seqs(one)[0], seqs(one)[0] + len(one)))
    assert sum(e["type"] == "text_delta" for e in one) == 8


async def test_reconnect_with_after_seq_replays_exactly_the_missed_events(
    daemon: RunningDaemon, tmp_path: Path
) -> None:
    """PROTOCOL §5: session/subscribe {afterSeq} delivers the buffered events after afterSeq
    first — exactly those missed — then live ones."""
    with trio.fail_after(IO_TIMEOUT):
        async with connect(daemon) as watcher:
            async with connect(daemon) as leaving:
                session_id = await create(leaving, tmp_path, {"text": "abc", "chunks": 3})
                await watcher.call("session/subscribe", {"sessionId": session_id})
                await leaving.call("session/run", {"sessionId": session_id, "prompt": "one"})
                seen = await leaving.wait_for_event(session_id, "turn_finished")
            last_seen = seen["seq"]
            await watcher.call("session/run", {"sessionId": session_id, "prompt": "two"})
            two = await watcher.wait_for_event(session_id, "turn_finished", response="echo: two")
            async with connect(daemon) as back:
                answer = await back.call(
                    "session/subscribe", {"sessionId": session_id, "afterSeq": last_seen}
                )
                await back.wait_for(lambda events: len(events) == answer["latestSeq"] - last_seen)
                await back.call("session/run", {"sessionId": session_id, "prompt": "three"})
                await back.wait_for(
                    lambda events: sum(e["type"] == "turn_finished" for e in events) == 2
                )
                await watcher.wait_for(
                    lambda events: sum(e["type"] == "turn_finished" for e in events) == 3
                )
    missed = [e for e in watcher.session_events(session_id) if e["seq"] > last_seen]
    assert back.session_events(session_id) == missed
    assert answer == {"latestSeq": two["seq"]}


async def test_after_seq_older_than_the_buffer_is_events_lost(
    daemon: RunningDaemon, tmp_path: Path
) -> None:
    """PROTOCOL §3/§5: afterSeq older than the replay buffer (or beyond the latest seq) is
    EventsLost (-32012) with {sessionId, oldestSeq}; an afterSeq inside it still works."""
    with trio.fail_after(IO_TIMEOUT):
        async with connect(daemon) as client:
            session_id = await create(client, tmp_path, {"text": "y" * 60, "chunks": 60})
            await client.call("session/run", {"sessionId": session_id, "prompt": "fill"})
            await client.call("session/run", {"sessionId": session_id, "prompt": "more"})
            latest = await client.wait_for_event(session_id, "turn_finished", response="echo: more")
            async with connect(daemon) as late:
                with pytest.raises(EventsLost) as lost:
                    await late.call("session/subscribe", {"sessionId": session_id, "afterSeq": 0})
                with pytest.raises(EventsLost) as beyond:
                    await late.call(
                        "session/subscribe",
                        {"sessionId": session_id, "afterSeq": latest["seq"] + 5},
                    )
                recent = await late.call(
                    "session/subscribe",
                    {"sessionId": session_id, "afterSeq": latest["seq"] - 3},
                )
                await late.wait_for(lambda events: len(events) == 3)
    data = lost.value.data
    assert data is not None
    assert data["sessionId"] == session_id
    assert data["oldestSeq"] == latest["seq"] - BUFFER + 1
    assert recent == {"latestSeq": latest["seq"]}
    # Not "no longer buffered": that seq was never published by this process.
    assert f"go up to seq {latest['seq']} only" in beyond.value.message
    assert "no longer buffered" not in beyond.value.message
    assert seqs(late.session_events(session_id)) == [
        latest["seq"] - 2,
        latest["seq"] - 1,
        latest["seq"],
    ]


async def test_unsubscribe_stops_the_events(daemon: RunningDaemon, tmp_path: Path) -> None:
    """PROTOCOL §5: session/unsubscribe → {ok:true}; no further event reaches it."""
    with trio.fail_after(IO_TIMEOUT):
        async with connect(daemon) as runner, connect(daemon) as quiet:
            session_id = await create(runner, tmp_path)
            assert await quiet.call("session/subscribe", {"sessionId": session_id}) == {
                "latestSeq": 0
            }
            assert await quiet.call("session/unsubscribe", {"sessionId": session_id}) == {
                "ok": True
            }
            await runner.call("session/run", {"sessionId": session_id, "prompt": "x"})
            await runner.wait_for_event(session_id, "turn_finished")
            await quiet.call("session/get", {"sessionId": session_id})
    assert quiet.events == []


async def test_a_subscriber_that_never_reads_does_not_hold_up_the_turn(
    daemon: RunningDaemon, tmp_path: Path
) -> None:
    """PROTOCOL §6: a slow subscriber never slows a turn: a connection that subscribes and
    never reads is cut off with an overflow notice while the turn completes and every other
    subscriber gets every event."""
    # Paced so that a reading subscriber keeps up with ease, large enough that the stalled
    # one fills its socket buffer and then its event queue.
    deltas, width = 1600, 1000
    with trio.fail_after(IO_TIMEOUT * 2):
        async with connect(daemon) as client:
            step = {"text": "z" * (deltas * width), "chunks": deltas, "delayMs": 1}
            session_id = await create(client, tmp_path, step)
            stalled = await trio.open_unix_socket(str(daemon.socket_path))
            request = {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "session/subscribe",
                "params": {"sessionId": session_id},
            }
            await stalled.send_all(json.dumps(request).encode() + b"\n")
            await client.call("session/subscribe", {"sessionId": session_id})
            result = await client.call("session/run", {"sessionId": session_id, "prompt": "go"})
            finished = await client.wait_for_event(session_id, "turn_finished")
            received = b""
            while b'"overflow"' not in received:
                chunk = await stalled.receive_some(1 << 16)
                assert chunk, "the stalled connection closed without an overflow notice"
                received += chunk
            await stalled.aclose()
    assert result["response"] == "z" * (deltas * width)
    events = client.session_events(session_id)
    assert sum(e["type"] == "text_delta" for e in events) == deltas
    assert seqs(events) == list(range(seqs(events)[0], finished["seq"] + 1))
    lines = [json.loads(line) for line in received.splitlines() if line.strip()]
    notices = [m["params"] for m in lines if m.get("params", {}).get("type") == "overflow"]
    assert len(notices) == 1
    assert notices[0]["sessionId"] == session_id
    delivered = [
        m["params"]["seq"]
        for m in lines
        if m.get("method") == "session/event" and m["params"]["type"] != "overflow"
    ]
    assert delivered == sorted(delivered)
    assert len(delivered) < finished["seq"]
