"""Work cut off by SIGKILL, through a real robotad, and the session log after it: a compaction
is closed in the log as cut off on the next load, with the history as it was before it began;
a first turn's prompt, in the log but never in the record, does not come back on replay."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import trio

from tests.daemon_helpers import (
    IO_TIMEOUT,
    PROCESS_TIMEOUT,
    DaemonHome,
    connect,
    killed_during,
    running_daemon,
    start_robotad,
)


def log_entries(home: DaemonHome, session_id: str) -> list[dict[str, Any]]:
    text = (home.state_dir / "logs" / f"{session_id}.jsonl").read_text()
    return [json.loads(line) for line in text.splitlines()]


async def cut_off(
    home: DaemonHome,
    cwd: Path,
    script: list[dict[str, Any]],
    prompts: list[str],
    method: str,
    params: dict[str, Any],
    *,
    once: str,
    **fields: Any,
) -> list[BaseException]:
    """Session "s" created with `script`, `prompts` run, then `method` called and the daemon
    SIGKILLed at its event `once` (with `fields`); what the call raised for it."""
    daemon = start_robotad(home)
    try:
        with trio.fail_after(IO_TIMEOUT):
            async with connect(daemon) as client:
                await client.call(
                    "session/create", {"cwd": str(cwd), "sessionId": "s", "script": script}
                )
                for prompt in prompts:
                    await client.call("session/run", {"sessionId": "s", "prompt": prompt})
                return await killed_during(
                    daemon, client, method, params, once=("s", once), **fields
                )
    finally:
        daemon.process.kill()
        daemon.process.wait(PROCESS_TIMEOUT)


async def test_a_compaction_cut_off_by_sigkill_is_closed_in_the_log(tmp_path: Path) -> None:
    """G-163, PROTOCOL §10.2: the log of a daemon killed during a compaction ends with its
    "started"; session/log used to call it complete after the restart, the ``recovered``
    entry covering provider requests and tool calls only. Now the entry names the cut-off
    compaction's trigger, and the history is the two turns as they were."""
    home = DaemonHome(tmp_path / "home")
    script = [{"text": "a1"}, {"text": "a2"}, {"summary": "SUMMARY", "delayMs": 60_000}]
    lost = await cut_off(
        home,
        tmp_path,
        script,
        ["first", "second"],
        "session/compact",
        {"sessionId": "s"},
        once="compaction",
        phase="started",
    )
    assert lost, "the compaction cannot have finished: its summary waits a minute"
    assert log_entries(home, "s")[-1]["data"] == {"trigger": "manual", "phase": "started"}
    with running_daemon(home) as restarted, trio.fail_after(IO_TIMEOUT):
        async with connect(restarted) as client:
            messages = (await client.call("session/history", {"sessionId": "s"}))["messages"]
            report = await client.call("session/log", {"sessionId": "s"})
    assert [m["content"] for m in messages] == ["first", "a1", "second", "a2"]
    assert (report["complete"], report["problems"]) == (True, [])
    (recovered,) = [e for e in log_entries(home, "s") if e["event"] == "recovered"]
    assert recovered["data"]["compaction"] == "manual"


async def test_a_first_turn_cut_off_by_sigkill_leaves_a_log_that_replays_the_history(
    tmp_path: Path,
) -> None:
    """G-145: the first turn's prompt reached the log (its history_mutation) and never the
    record (a first turn saves at its end). After the restart the loaded session logs its
    (empty) history whole, so the log replays to the history the session holds, before and
    after the next turn; it used to replay the lost prompt and fail session/log for good."""
    home = DaemonHome(tmp_path / "home")
    script = [{"text": "slow", "delayMs": 1_500}]
    lost = await cut_off(
        home,
        tmp_path,
        script,
        [],
        "session/run",
        {"sessionId": "s", "prompt": "lost"},
        once="context_updated",
        phase="estimated",
    )
    assert lost, "the turn cannot have finished: its reply waits 1.5 s"
    logged = (home.state_dir / "logs" / "s.jsonl").read_text()
    assert '"lost"' in logged  # the prompt reached the log before the kill
    with running_daemon(home) as restarted, trio.fail_after(IO_TIMEOUT):
        async with connect(restarted) as client:
            history = (await client.call("session/history", {"sessionId": "s"}))["messages"]
            before = await client.call("session/log", {"sessionId": "s"})
            await client.call("session/run", {"sessionId": "s", "prompt": "kept"})
            after_turn = await client.call("session/log", {"sessionId": "s"})
            messages = (await client.call("session/history", {"sessionId": "s"}))["messages"]
    assert history == []
    assert (before["complete"], before["problems"]) == (True, [])
    assert (after_turn["complete"], after_turn["problems"]) == (True, [])
    assert [m["content"] for m in messages] == ["kept", "slow"]


async def test_a_log_line_a_kill_left_unfinished_leaves_the_log_complete(tmp_path: Path) -> None:
    """A SIGKILL during the write of a line longer than a page leaves the log ending in half a
    line (the soak's crash test met one). The next robotad cuts it away before its first line
    there: kept, it sat in the middle of the log for good and session/log said incomplete."""
    home = DaemonHome(tmp_path / "home")
    with running_daemon(home) as daemon, trio.fail_after(IO_TIMEOUT):
        async with connect(daemon) as client:
            await client.call("session/create", {"cwd": str(tmp_path), "sessionId": "s"})
            await client.call("session/run", {"sessionId": "s", "prompt": "first"})
    log = home.state_dir / "logs" / "s.jsonl"
    with log.open("ab") as torn:  # what the kill left of a provider_request line
        torn.write(b'{"event":"provider_request","data":{"tools":[' + b" " * 5_000)
    with running_daemon(home) as restarted, trio.fail_after(IO_TIMEOUT):
        async with connect(restarted) as client:
            await client.call("session/run", {"sessionId": "s", "prompt": "second"})
            report = await client.call("session/log", {"sessionId": "s"})
    assert report["complete"] is True, report
    assert all(line.startswith("{") for line in log.read_text().splitlines())
    assert "removed" in restarted.output()
