"""A compaction cut off by SIGKILL, through a real robotad: the next load closes it in the
session log as cut off, and the history is what it was before the compaction began."""

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


async def test_a_compaction_cut_off_by_sigkill_is_closed_in_the_log(tmp_path: Path) -> None:
    """G-163, PROTOCOL §10.2: the log of a daemon killed during a compaction ends with its
    "started"; session/log used to call it complete after the restart, the ``recovered``
    entry covering provider requests and tool calls only. Now the entry names the cut-off
    compaction's trigger, and the history is the two turns as they were."""
    home = DaemonHome(tmp_path / "home")
    script = [{"text": "a1"}, {"text": "a2"}, {"summary": "SUMMARY", "delayMs": 60_000}]
    daemon = start_robotad(home)
    try:
        with trio.fail_after(IO_TIMEOUT):
            async with connect(daemon) as client:
                await client.call(
                    "session/create", {"cwd": str(tmp_path), "sessionId": "s", "script": script}
                )
                for prompt in ("first", "second"):
                    await client.call("session/run", {"sessionId": "s", "prompt": prompt})
                lost = await killed_during(
                    daemon,
                    client,
                    "session/compact",
                    {"sessionId": "s"},
                    once=("s", "compaction"),
                    phase="started",
                )
    finally:
        daemon.process.kill()
        daemon.process.wait(PROCESS_TIMEOUT)
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
