"""Sandboxed sessions through a real robotad (PROTOCOL.md §10.4): the setting on the wire and in
the record, sandboxed Bash run without asking yet confined, ``plan`` still read-only, Write
refused outside the roots even in ``bypassPermissions``, ``read-only`` mode, no process left
behind, robotactl, and the refusal (-32014, and the start-up log line) where bubblewrap is
missing. The daemon's default sandbox is configured ``read-only``.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import trio

from protocol.errors import InvalidParams, NotAllowed
from robotad.sandbox import SandboxSupport
from tests.daemon_helpers import (
    IO_TIMEOUT,
    PROCESS_TIMEOUT,
    REPO,
    Client,
    DaemonHome,
    RunningDaemon,
    connect,
    running_daemon,
)
from tests.sandbox.conftest import Arena
from tests.sandbox.test_sandbox_escapes import _processes_naming


@pytest.fixture(scope="module")
def daemon(
    tmp_path_factory: pytest.TempPathFactory, sandbox_support: SandboxSupport
) -> Iterator[RunningDaemon]:
    home = DaemonHome(tmp_path_factory.mktemp("sandboxed"))
    home.write_config('[sandbox]\nmode = "read-only"\n')
    with running_daemon(home) as running:
        yield running


def _bash(command: str) -> dict[str, Any]:
    return {"toolCalls": [{"name": "Bash", "arguments": {"command": command}}]}


def _write(path: str) -> dict[str, Any]:
    return {"toolCalls": [{"name": "Write", "arguments": {"file_path": path, "content": "x\n"}}]}


async def _one_turn(
    client: Client, arena: Arena, step: dict[str, Any], **create: Any
) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """Create a session in the arena's workspace scripted with `step`, run one turn; return
    its SessionInfo, the turn's result and the tool message."""
    info = await client.call(
        "session/create", {"cwd": str(arena.ws), "script": [step, {"text": "done"}], **create}
    )
    result = await client.call("session/run", {"sessionId": info["sessionId"], "prompt": "go"})
    history = await client.call("session/history", {"sessionId": info["sessionId"]})
    tools = [m for m in history["messages"] if m["role"] == "tool"]
    return info, result, tools[0] if tools else {}


async def _sandboxed_turn(daemon: RunningDaemon, cwd: Path, command: str) -> None:
    """One turn of a workspace-write session in `cwd` whose model runs `command` in Bash."""
    script = [_bash(command), {"text": "done"}]
    with trio.fail_after(IO_TIMEOUT):
        async with connect(daemon) as client:
            info = await client.call(
                "session/create", {"cwd": str(cwd), "sandbox": "workspace-write", "script": script}
            )
            await client.call("session/run", {"sessionId": info["sessionId"], "prompt": "go"})


async def test_a_sandboxed_bash_call_runs_without_asking_and_stays_confined(
    daemon: RunningDaemon, arena: Arena
) -> None:
    step = _bash(f"echo made > made.txt; echo pwned > {arena.target}")
    with trio.fail_after(IO_TIMEOUT):
        async with connect(daemon) as client:
            info, result, tool = await _one_turn(client, arena, step, sandbox="workspace-write")
            got = await client.call("session/get", {"sessionId": info["sessionId"]})
    assert info["sandbox"] == got["sandbox"] == "workspace-write"
    assert result["status"] == "completed"  # default mode, no approval asked
    assert tool["metadata"]["ok"] is False
    assert "Read-only file system" in tool["content"]
    assert (arena.ws / "made.txt").read_text() == "made\n"
    assert arena.untouched()
    record = json.loads(daemon.home.record_path(info["sessionId"]).read_text())
    sandbox = record["record"]["settings"]["sandbox"]
    assert sandbox == {"mode": "workspace-write", "network": False, "writableRoots": []}


async def test_an_unsandboxed_session_still_asks(daemon: RunningDaemon, arena: Arena) -> None:
    with trio.fail_after(IO_TIMEOUT):
        async with connect(daemon) as client:
            info, result, _ = await _one_turn(client, arena, _bash("true"), sandbox="off")
            await client.call(
                "session/abandon",
                {"sessionId": info["sessionId"], "executionId": result["executionId"]},
            )
    assert info["sandbox"] == "off"
    assert result["status"] == "waiting"


async def test_the_configured_default_applies(daemon: RunningDaemon, arena: Arena) -> None:
    with trio.fail_after(IO_TIMEOUT):
        async with connect(daemon) as client:
            info, result, tool = await _one_turn(client, arena, _bash("echo x > made.txt"))
    assert info["sandbox"] == "read-only"
    assert result["status"] == "completed"
    assert tool["metadata"]["ok"] is False
    assert not (arena.ws / "made.txt").exists()


async def test_plan_mode_stays_read_only(daemon: RunningDaemon, arena: Arena) -> None:
    with trio.fail_after(IO_TIMEOUT):
        async with connect(daemon) as client:
            _, result, tool = await _one_turn(
                client,
                arena,
                _bash("echo x > made.txt"),
                sandbox="workspace-write",
                permissionMode="plan",
            )
    assert result["status"] == "completed"
    assert tool["metadata"]["ok"] is False
    assert not (arena.ws / "made.txt").exists()


@pytest.mark.parametrize("mode", ["workspace-write", "read-only"])
async def test_write_outside_the_roots_fails_even_in_bypass(
    daemon: RunningDaemon, arena: Arena, mode: str
) -> None:
    with trio.fail_after(IO_TIMEOUT):
        async with connect(daemon) as client:
            _, result, tool = await _one_turn(
                client,
                arena,
                _write(str(arena.outside / "planted.txt")),
                sandbox=mode,
                permissionMode="bypassPermissions",
            )
            _, _, inside = await _one_turn(
                client,
                arena,
                _write("inside.txt"),
                sandbox=mode,
                permissionMode="bypassPermissions",
            )
    assert result["status"] == "completed"
    assert tool["metadata"]["ok"] is False
    assert "sandbox" in tool["content"]
    assert arena.untouched()
    assert inside["metadata"]["ok"] is (mode == "workspace-write")
    assert (arena.ws / "inside.txt").exists() is (mode == "workspace-write")


async def test_no_background_child_outlives_the_call_or_the_session(
    daemon: RunningDaemon, arena: Arena
) -> None:
    token = f"robota-escape-{uuid.uuid4().hex}"
    command = f"( setsid sh -c 'sleep 1000; echo {token}' </dev/null >/dev/null 2>&1 & ); echo ok"
    with trio.fail_after(IO_TIMEOUT):
        async with connect(daemon) as client:
            info, _, tool = await _one_turn(client, arena, _bash(command), sandbox="read-only")
            assert tool["metadata"]["ok"] is True
            assert _processes_naming(token) == []
            await client.call("session/close", {"sessionId": info["sessionId"]})
            reopened = await client.call("session/get", {"sessionId": info["sessionId"]})
    assert reopened["sandbox"] == "read-only"  # a reloaded session is confined as before
    assert _processes_naming(token) == []


async def test_a_sandboxed_command_dies_with_a_killed_robotad(
    tmp_path: Path, arena: Arena, sandbox_support: SandboxSupport
) -> None:
    """A SIGKILLed robotad takes its sandboxed command with it: the tether kills the group,
    the shell bwrap runs under among it, and bwrap's --die-with-parent the sandbox's inside."""
    token = f"robota-orphan-{uuid.uuid4().hex}"
    command = f"sh -c 'sleep 1000; echo {token}'"
    home = DaemonHome(tmp_path / "home")
    with running_daemon(home) as killed, trio.fail_after(IO_TIMEOUT):
        async with connect(killed) as client:
            info = await client.call(
                "session/create",
                {"cwd": str(arena.ws), "sandbox": "workspace-write", "script": [_bash(command)]},
            )
            await client.call("session/subscribe", {"sessionId": info["sessionId"]})
            run = {"sessionId": info["sessionId"], "prompt": "go"}
            async with trio.open_nursery() as nursery:
                nursery.start_soon(client.call, "session/run", run)
                while not _processes_naming(token):
                    await trio.sleep(0.05)
                killed.process.kill()
                nursery.cancel_scope.cancel()
        try:
            while _processes_naming(token):
                await trio.sleep(0.05)
        finally:
            for pid in _processes_naming(token):  # a failed test leaves nothing running
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)


async def test_a_bad_sandbox_value_is_located(daemon: RunningDaemon, arena: Arena) -> None:
    with trio.fail_after(IO_TIMEOUT):
        async with connect(daemon) as client:
            with pytest.raises(InvalidParams) as refused:
                await client.call("session/create", {"cwd": str(arena.ws), "sandbox": "strict"})
    assert [issue["path"] for issue in refused.value.issues] == ["$.sandbox"]


def test_robotactl_new_sandbox_and_show(daemon: RunningDaemon, arena: Arena) -> None:
    def ctl(*args: str) -> subprocess.CompletedProcess[str]:
        argv = [sys.executable, "-m", "robotactl", "--socket", str(daemon.socket_path), *args]
        return subprocess.run(
            argv,
            capture_output=True,
            text=True,
            env=daemon.home.environment(),
            cwd=REPO,
            timeout=PROCESS_TIMEOUT,
            check=False,
        )

    made = ctl("new", "--cwd", str(arena.ws), "--sandbox", "workspace-write")
    assert made.returncode == 0, made.stderr
    shown = ctl("show", "-s", made.stdout.strip())
    assert shown.returncode == 0, shown.stderr
    assert "sandbox workspace-write" in shown.stdout
    assert ctl("new", "--sandbox", "nonsense").returncode == 2


async def test_the_daemon_logs_that_sandboxing_is_available(
    daemon: RunningDaemon, arena: Arena
) -> None:
    """Probed beside serving; a sandboxed create waits for (and so follows) the answer."""
    with trio.fail_after(IO_TIMEOUT):
        async with connect(daemon) as client:
            await client.call("session/create", {"cwd": str(arena.ws), "sandbox": "read-only"})
    assert "robotad.sandbox: sandbox available: bubblewrap" in daemon.output()


class _HomeWithoutBwrap(DaemonHome):
    """A daemon whose PATH is an empty folder: no bwrap to be found."""

    def environment(self) -> dict[str, str]:
        empty = self.root / "empty-path"
        empty.mkdir(exist_ok=True)
        return {**super().environment(), "PATH": str(empty)}


async def test_without_bwrap_a_sandboxed_create_is_refused_naming_why(
    tmp_path: Path, arena: Arena
) -> None:
    home = _HomeWithoutBwrap(tmp_path / "no-bwrap")
    with running_daemon(home) as running:
        with trio.fail_after(IO_TIMEOUT):
            async with connect(running) as client:
                for mode in ("workspace-write", "read-only"):
                    with pytest.raises(NotAllowed) as refused:
                        await client.call("session/create", {"cwd": str(arena.ws), "sandbox": mode})
                    assert "bwrap" in refused.value.data["reason"]  # type: ignore[index]
                    assert mode in refused.value.data["reason"]  # type: ignore[index]
                    assert "--sandbox off" in refused.value.data["reason"]  # type: ignore[index]
                listed = await client.call("session/list", {})
                plain = await client.call("session/create", {"cwd": str(arena.ws)})
        assert "sandbox unavailable: bwrap" in running.output()
    assert listed["sessions"] == []  # nothing was made by the refusals
    assert plain["sandbox"] == "off"


async def test_robotas_config_and_state_stay_read_only_inside_the_workspace(
    daemon: RunningDaemon,
) -> None:
    """A session working in a folder that holds robotad's config file and state folder cannot
    rewrite either (no allow rule or mode planted for later), yet writes beside them."""
    home = daemon.home
    before = home.config_path.read_text()
    command = (
        "echo 'default_provider = \"x\"' >> config/config.toml; "
        "echo planted > state/planted.json; echo ok > beside.txt"
    )
    await _sandboxed_turn(daemon, home.root, command)
    assert home.config_path.read_text() == before
    assert not (home.state_dir / "planted.json").exists()
    assert (home.root / "beside.txt").read_text() == "ok\n"


async def test_robotas_config_folder_exists_from_the_start_so_no_command_can_plant_one(
    daemon: RunningDaemon,
) -> None:
    """A config folder a sandboxed command could create would be read, hooks and all, at the
    next start: robotad makes it at start (0700), and a sandbox keeps it read-only."""
    home = daemon.home
    folder = home.root / "xdg-config" / "robota"
    assert folder.is_dir()
    assert folder.stat().st_mode & 0o777 == 0o700
    planting = "echo '[[hooks.PreToolUse]]' > xdg-config/robota/config.toml"
    await _sandboxed_turn(daemon, home.root, planting)
    assert not (folder / "config.toml").exists()
