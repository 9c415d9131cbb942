"""A loaded session keeps its session log open between lines; closing or unloading the
session releases the descriptor, so none outlives its session (a real robotad, read through
``/proc/<pid>/fd``)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import trio

from tests.daemon_helpers import (
    IO_TIMEOUT,
    Client,
    DaemonHome,
    RunningDaemon,
    connect,
    running_daemon,
)

#: Between two looks at session/list while waiting for an idle unload to happen.
POLL_INTERVAL = 0.05


def log_descriptors(daemon: RunningDaemon, session_id: str) -> int:
    """How many of the daemon's descriptors name the session's log file."""
    log = str(daemon.home.state_dir / "logs" / f"{session_id}.jsonl")
    count = 0
    for fd in os.listdir(f"/proc/{daemon.pid}/fd"):
        try:
            target = os.readlink(f"/proc/{daemon.pid}/fd/{fd}")
        except OSError:
            continue
        count += target.removesuffix(" (deleted)") == log
    return count


async def run_once(client: Client, cwd: Path) -> str:
    session_id: str = (await client.call("session/create", {"cwd": str(cwd)}))["sessionId"]
    await client.call("session/run", {"sessionId": session_id, "prompt": "hi"})
    return session_id


async def loaded(client: Client, session_id: str) -> bool:
    rows = (await client.call("session/list"))["sessions"]
    return bool(next(r for r in rows if r["sessionId"] == session_id)["loaded"])


async def test_closing_or_unloading_a_session_releases_its_log(
    tmp_path_factory: pytest.TempPathFactory, tmp_path: Path
) -> None:
    home = DaemonHome(tmp_path_factory.mktemp("descriptors"))
    with running_daemon(home, "--idle-unload-seconds", "0.5") as daemon:
        with trio.fail_after(IO_TIMEOUT):
            async with connect(daemon) as client:
                closed = await run_once(client, tmp_path)
                open_while_loaded = log_descriptors(daemon, closed)
                await client.call("session/close", {"sessionId": closed})
                after_close = log_descriptors(daemon, closed)
            async with connect(daemon) as client:  # its runner is subscribed: it leaves
                unloaded = await run_once(client, tmp_path)
            async with connect(daemon) as client:
                while await loaded(client, unloaded):
                    await trio.sleep(POLL_INTERVAL)
                after_unload = log_descriptors(daemon, unloaded)
    assert open_while_loaded == 1
    assert (after_close, after_unload) == (0, 0)
