"""A session log through a crash in the session's first turn, through a real robotad: the
prompt the log holds but the record never did must not come back when the log is replayed."""

from __future__ import annotations

from pathlib import Path

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


async def test_a_first_turn_cut_off_by_sigkill_leaves_a_log_that_replays_the_history(
    tmp_path: Path,
) -> None:
    """G-145: the first turn's prompt reached the log (its history_mutation) and never the
    record (a first turn saves at its end). After the restart the loaded session logs its
    (empty) history whole, so the log replays to the history the session holds, before and
    after the next turn; it used to replay the lost prompt and fail session/log for good."""
    home = DaemonHome(tmp_path / "home")
    script = [{"text": "slow", "delayMs": 1_500}]
    daemon = start_robotad(home)
    try:
        with trio.fail_after(IO_TIMEOUT):
            async with connect(daemon) as client:
                await client.call(
                    "session/create", {"cwd": str(tmp_path), "sessionId": "s", "script": script}
                )
                lost = await killed_during(
                    daemon,
                    client,
                    "session/run",
                    {"sessionId": "s", "prompt": "lost"},
                    once=("s", "context_updated"),
                    phase="estimated",
                )
    finally:
        daemon.process.kill()
        daemon.process.wait(PROCESS_TIMEOUT)
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
