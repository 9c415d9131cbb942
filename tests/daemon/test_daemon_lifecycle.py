"""The daemon's life around its sessions, through real robotad processes: idle unload and
transparent reload, shutdown with a turn running (finished within the grace, or aborted), and
what a restart keeps."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import trio

from protocol.errors import EventsLost, RecordCorrupt, TurnAborted
from tests.daemon_helpers import (
    IO_TIMEOUT,
    Client,
    DaemonHome,
    connect,
    running_daemon,
    start_robotad,
    stop_robotad,
)

#: Between two looks at session/list while waiting for an idle unload to happen.
POLL_INTERVAL = 0.05


async def loaded(client: Client, session_id: str) -> bool:
    rows = (await client.call("session/list"))["sessions"]
    return bool(next(r for r in rows if r["sessionId"] == session_id)["loaded"])


async def create_waiting(client: Client, cwd: Path) -> str:
    """A session whose first turn waits for approval of a Write."""
    call = {"name": "Write", "arguments": {"file_path": str(cwd / "w.txt"), "content": "w\n"}}
    params = {"cwd": str(cwd), "script": [{"toolCalls": [call]}, {"text": "written"}]}
    session_id: str = (await client.call("session/create", params))["sessionId"]
    result = await client.call("session/run", {"sessionId": session_id, "prompt": "write"})
    assert result["status"] == "waiting"
    return session_id


def log_events(home: DaemonHome, session_id: str) -> list[str]:
    path = home.state_dir / "logs" / f"{session_id}.jsonl"
    return [json.loads(line)["event"] for line in path.read_text().splitlines()]


async def test_idle_sessions_unload_and_reload_transparently(
    tmp_path_factory: pytest.TempPathFactory, tmp_path: Path
) -> None:
    """DESIGN: a session nobody uses or watches is unloaded after the idle period (a
    shutdown: SessionEnd, persist); its next use loads it again with its history. A session
    with a subscriber, or with an execution waiting for approval, stays loaded."""
    home = DaemonHome(tmp_path_factory.mktemp("idle"))
    with running_daemon(home, "--idle-unload-seconds", "0.2") as daemon:
        with trio.fail_after(IO_TIMEOUT):
            async with connect(daemon) as watcher:
                watched = (await watcher.call("session/create", {"cwd": str(tmp_path)}))[
                    "sessionId"
                ]
                await watcher.call("session/subscribe", {"sessionId": watched})
                async with connect(daemon) as asker:
                    waiting = await create_waiting(asker, tmp_path)
                async with connect(daemon) as user:
                    idle = (await user.call("session/create", {"cwd": str(tmp_path)}))["sessionId"]
                    await user.call("session/run", {"sessionId": idle, "prompt": "before"})
                async with connect(daemon) as observer:
                    while await loaded(observer, idle):
                        await trio.sleep(POLL_INTERVAL)
                    still_watched = await loaded(observer, watched)
                    still_waiting = await loaded(observer, waiting)
                    status = await observer.call("daemon/status")
                    reply = await observer.call(
                        "session/run", {"sessionId": idle, "prompt": "after"}
                    )
                    info = await observer.call("session/get", {"sessionId": idle})
    assert still_watched is True
    assert still_waiting is True
    assert status["sessions"]["loaded"] == 2
    assert reply["response"] == "echo: after"
    assert (info["messageCount"], info["turnCount"]) == (4, 2)
    events = log_events(home, idle)
    assert events.count("session_start") == 2
    assert events.index("session_end") < len(events) - events[::-1].index("session_start") - 1


async def test_shutdown_lets_a_running_turn_finish_within_the_grace(
    tmp_path_factory: pytest.TempPathFactory, tmp_path: Path
) -> None:
    """PROTOCOL §5 daemon/shutdown: {ok:true} at once; the running turn finishes within the
    grace, its requester gets the result, every session is closed and persisted (G-010), and
    the daemon exits 0."""
    home = DaemonHome(tmp_path_factory.mktemp("grace"))
    daemon = start_robotad(home)
    try:
        with trio.fail_after(IO_TIMEOUT):
            async with connect(daemon) as runner, connect(daemon) as admin:
                step = {"text": "finishing", "chunks": 6, "delayMs": 100}
                info = await runner.call("session/create", {"cwd": str(tmp_path), "script": [step]})
                session_id = info["sessionId"]
                result: dict[str, Any] = {}
                async with trio.open_nursery() as nursery:

                    async def run() -> None:
                        result.update(
                            await runner.call(
                                "session/run", {"sessionId": session_id, "prompt": "go"}
                            )
                        )

                    nursery.start_soon(run)
                    await runner.wait_for_event(session_id, "text_delta")
                    assert await admin.call("daemon/shutdown", {"graceSeconds": 10}) == {"ok": True}
                closed = await runner.wait_for_event(session_id, "session_closed")
        assert await trio.to_thread.run_sync(daemon.wait_exit) == 0
    finally:
        stop_robotad(daemon)
    assert result["response"] == "finishing"
    assert closed["seq"] > 0
    record = json.loads(home.record_path(session_id).read_bytes())["record"]
    assert [m["content"] for m in record["messages"]] == ["go", "finishing"]
    assert record["turnCount"] == 1


async def test_shutdown_aborts_what_outlasts_the_grace(
    tmp_path_factory: pytest.TempPathFactory, tmp_path: Path
) -> None:
    """PROTOCOL §5 daemon/shutdown: a turn still running when the grace ends is aborted; its
    requester hears TurnAborted (-32006); the history up to the abort is persisted and the
    daemon exits 0."""
    home = DaemonHome(tmp_path_factory.mktemp("abort"))
    daemon = start_robotad(home)
    try:
        with trio.fail_after(IO_TIMEOUT):
            async with connect(daemon) as runner, connect(daemon) as admin:
                step = {"text": "x" * 100, "chunks": 100, "delayMs": 100}
                info = await runner.call("session/create", {"cwd": str(tmp_path), "script": [step]})
                session_id = info["sessionId"]
                outcome: dict[str, Any] = {}
                async with trio.open_nursery() as nursery:

                    async def run() -> None:
                        try:
                            await runner.call(
                                "session/run",
                                {"sessionId": session_id, "prompt": "long", "turnId": "t-long"},
                            )
                        except TurnAborted as exc:
                            outcome["error"] = exc

                    nursery.start_soon(run)
                    await runner.wait_for_event(session_id, "text_delta")
                    await admin.call("daemon/shutdown", {"graceSeconds": 0})
        assert await trio.to_thread.run_sync(daemon.wait_exit) == 0
    finally:
        stop_robotad(daemon)
    assert outcome["error"].data == {"sessionId": session_id, "turnId": "t-long"}
    record = json.loads(home.record_path(session_id).read_bytes())["record"]
    assert record["messages"][0]["content"] == "long"
    assert record["turnCount"] == 0


async def test_a_restart_keeps_records_settings_forks_and_the_script(
    tmp_path_factory: pytest.TempPathFactory, tmp_path: Path
) -> None:
    """G-010: after a daemon restart every session is there as it was closed: history,
    turnCount, permission mode, forkedFrom (record and list) and the scripted provider's
    remaining steps. The session's seqs go on above the earlier process's: a client's
    ``afterSeq`` from it is EventsLost, never a silent skip. A copy of a record made by hand
    under another name is corrupt, never loaded as the original."""
    home = DaemonHome(tmp_path_factory.mktemp("restart"))
    with running_daemon(home) as daemon:
        with trio.fail_after(IO_TIMEOUT):
            async with connect(daemon) as client:
                info = await client.call(
                    "session/create",
                    {"cwd": str(tmp_path), "script": [{"text": "one"}, {"text": "two"}]},
                )
                source = info["sessionId"]
                await client.call("session/run", {"sessionId": source, "prompt": "a"})
                await client.call(
                    "session/setPermissionMode", {"sessionId": source, "mode": "plan"}
                )
                fork = await client.call("session/fork", {"sessionId": source})
                earlier = await client.wait_for_event(source, "turn_finished")
    backup = home.record_path(source).with_name("backup.json")
    backup.write_bytes(home.record_path(source).read_bytes())
    with running_daemon(home) as again:
        with trio.fail_after(IO_TIMEOUT):
            async with connect(again) as client:
                rows = {s["sessionId"]: s for s in (await client.call("session/list"))["sessions"]}
                restored = await client.call("session/get", {"sessionId": source})
                forked = await client.call("session/get", {"sessionId": fork["sessionId"]})
                reply = await client.call("session/run", {"sessionId": source, "prompt": "b"})
                fork_reply = await client.call(
                    "session/run", {"sessionId": fork["sessionId"], "prompt": "c"}
                )
                now = await client.wait_for_event(source, "turn_finished")
                async with connect(again) as late:
                    with pytest.raises(EventsLost) as stale:
                        await late.call(
                            "session/subscribe", {"sessionId": source, "afterSeq": earlier["seq"]}
                        )
                    everything = await late.call(
                        "session/subscribe", {"sessionId": source, "afterSeq": 0}
                    )
                with pytest.raises(RecordCorrupt) as copied:
                    await client.call("session/get", {"sessionId": "backup"})
    assert now["seq"] > earlier["seq"]
    assert stale.value.data is not None
    assert stale.value.data["oldestSeq"] > earlier["seq"] + 1
    assert everything == {"latestSeq": now["seq"]}
    assert copied.value.data is not None
    assert [issue["path"] for issue in copied.value.data["issues"]] == ["$.record.id"]
    assert rows["backup"]["status"] == "corrupt"
    assert (restored["messageCount"], restored["turnCount"]) == (2, 1)
    assert restored["permissionMode"] == "plan"
    assert restored["createdAt"] == info["createdAt"]
    assert (forked["messageCount"], forked["turnCount"], forked["permissionMode"]) == (2, 1, "plan")
    assert rows[fork["sessionId"]]["forkedFrom"] == source
    assert rows[source]["loaded"] is False
    assert reply["response"] == "two"
    assert fork_reply["response"] == "two"
    stored = json.loads(home.record_path(fork["sessionId"]).read_bytes())["record"]
    assert stored["forkedFrom"]["sessionId"] == source


async def test_a_killed_daemon_leaves_loadable_records(
    tmp_path_factory: pytest.TempPathFactory, tmp_path: Path
) -> None:
    """G-007, G-008 at the daemon level: SIGKILL in the middle of a turn leaves every record
    loadable as of its last settled save (never a partial file under a record's name); a
    restart sweeps stray temp files and the sessions carry on. The project rules' folder is
    swept too: a SIGKILL during a project addRule (1 in 40 of a sweep) left its temp file
    there for good."""
    home = DaemonHome(tmp_path_factory.mktemp("killed"))
    daemon = start_robotad(home)
    try:
        with trio.fail_after(IO_TIMEOUT):
            async with connect(daemon) as client:
                done = await client.call("session/create", {"cwd": str(tmp_path)})
                await client.call("session/run", {"sessionId": done["sessionId"], "prompt": "a"})
                step = {"text": "x" * 100, "chunks": 100, "delayMs": 50}
                busy = await client.call("session/create", {"cwd": str(tmp_path), "script": [step]})
                await client.call(
                    "session/run", {"sessionId": busy["sessionId"], "prompt": "b", "wait": False}
                )
                await client.wait_for_event(busy["sessionId"], "text_delta")
                daemon.process.kill()
                daemon.process.wait()
    finally:
        stop_robotad(daemon)
    stray = home.state_dir / "sessions" / f".{busy['sessionId']}.json.0123456789abcdef.tmp"
    stray.write_bytes(b"half a record")
    projects = home.state_dir / "projects"
    projects.mkdir(mode=0o700)
    stray_rules = projects / f".{'0' * 64}.json.0123456789abcdef.tmp"
    stray_rules.write_bytes(b"half the rules")
    with running_daemon(home) as again:
        with trio.fail_after(IO_TIMEOUT):
            async with connect(again) as client:
                rows = {s["sessionId"]: s for s in (await client.call("session/list"))["sessions"]}
                finished = await client.call("session/get", {"sessionId": done["sessionId"]})
                interrupted = await client.call("session/get", {"sessionId": busy["sessionId"]})
                reply = await client.call(
                    "session/run", {"sessionId": done["sessionId"], "prompt": "again"}
                )
    assert {rows[s]["status"] for s in (done["sessionId"], busy["sessionId"])} == {"ok"}
    assert (finished["messageCount"], finished["turnCount"]) == (2, 1)
    assert (interrupted["messageCount"], interrupted["turnCount"]) == (0, 0)
    assert reply["response"] == "echo: again"
    assert not stray.exists()
    assert not stray_rules.exists()


async def test_a_waiting_approval_survives_a_restart(
    tmp_path_factory: pytest.TempPathFactory, tmp_path: Path
) -> None:
    """Architecture decision 2: approvals are checkpointed — after a daemon restart the waiting
    execution is pending with the same request, and resuming it completes the turn."""
    home = DaemonHome(tmp_path_factory.mktemp("approval"))
    with running_daemon(home) as daemon:
        with trio.fail_after(IO_TIMEOUT):
            async with connect(daemon) as client:
                session_id = await create_waiting(client, tmp_path)
                before = await client.call("session/pending", {"sessionId": session_id})
    with running_daemon(home) as again:
        with trio.fail_after(IO_TIMEOUT):
            async with connect(again) as client:
                after = await client.call("session/pending", {"sessionId": session_id})
                request = after["pending"]["requests"][0]
                resumed = await client.call(
                    "session/resume",
                    {
                        "sessionId": session_id,
                        "executionId": after["pending"]["executionId"],
                        "responses": [
                            {"requestId": request["requestId"], "responseId": "r", "approved": True}
                        ],
                    },
                )
    assert after == before
    assert resumed["response"] == "written"
    assert (tmp_path / "w.txt").read_text() == "w\n"
