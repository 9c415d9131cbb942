"""robotactl against a real robotad: status, call, shutdown, autostart and its refusals.

Every daemon here is a real ``python -m robotad`` process (started by the `robotad` fixture
or by robotactl's own autostart); robotactl runs as ``python -m robotactl`` under a timeout.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from protocol.errors import TurnAborted
from protocol.peer import JsonRpcPeer
from robotactl.cli import (
    ClientOptions,
    CommandFailed,
    RpcFailed,
    TurnAbortedFailed,
    run_with_daemon,
)
from robotactl.exit_codes import ExitCode
from tests.full_disk import remount_read_only, small_tmpfs

from .conftest import PROCESS_TIMEOUT, REPO, Ctl, Pidfds, RunningDaemon, child_environment


def sock(daemon: RunningDaemon) -> list[str]:
    return ["--socket", str(daemon.socket_path)]


# -- status ------------------------------------------------------------------------------------


def test_status_json_is_the_daemon_status_result(ctl: Ctl, robotad: RunningDaemon) -> None:
    result = ctl(*sock(robotad), "--json", "status")
    assert result.returncode == 0, result.stderr
    status = json.loads(result.stdout)
    assert list(status) == [
        "version",
        "protocolVersion",
        "pid",
        "startedAt",
        "socketPath",
        "stateDir",
        "sessions",
    ]
    assert status["pid"] == robotad.pid
    assert status["socketPath"] == str(robotad.socket_path)
    assert status["sessions"] == {"loaded": 0, "running": 0, "waiting": 0}
    assert result.stderr == ""


def test_status_json_equals_what_a_raw_client_gets(ctl: Ctl, robotad: RunningDaemon) -> None:
    """The same request written by hand (as socat would) yields the identical result."""
    import socket

    with socket.socket(socket.AF_UNIX) as raw:
        raw.settimeout(PROCESS_TIMEOUT)
        raw.connect(str(robotad.socket_path))
        raw.sendall(b'{"jsonrpc":"2.0","id":1,"method":"daemon/status"}\n')
        reply = b""
        while not reply.endswith(b"\n"):
            chunk = raw.recv(65536)
            assert chunk, "daemon closed before answering"
            reply += chunk
    expected = json.loads(reply)["result"]
    result = ctl(*sock(robotad), "--json", "status")
    assert json.loads(result.stdout) == expected


def test_status_table_for_people(ctl: Ctl, robotad: RunningDaemon) -> None:
    result = ctl(*sock(robotad), "status", NO_COLOR="")
    assert result.returncode == 0, result.stderr
    rows = dict(
        line.split(None, 1) for line in result.stdout.replace("state dir", "state_dir").splitlines()
    )
    assert rows["pid"] == str(robotad.pid)
    assert rows["socket"] == str(robotad.socket_path)
    assert rows["sessions"] == "0 loaded, 0 running, 0 waiting"
    assert rows["uptime"].split()[0].endswith(("s", "m", "h"))
    assert rows["state_dir"] == os.path.join(os.environ["XDG_STATE_HOME"], "robota")
    assert "\x1b[" not in result.stdout  # a pipe gets no colour


# -- call --------------------------------------------------------------------------------------


def test_call_prints_the_result_as_json(ctl: Ctl, robotad: RunningDaemon) -> None:
    result = ctl(
        *sock(robotad), "call", "initialize", '{"clientInfo": {"name": "t", "version": "1"}}'
    )
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["serverInfo"]["name"] == "robotad"


def test_call_reads_params_from_stdin(ctl: Ctl, robotad: RunningDaemon) -> None:
    result = ctl(*sock(robotad), "call", "daemon/status", "-", input="{}\n")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["pid"] == robotad.pid


def test_call_error_prints_code_message_and_data(ctl: Ctl, robotad: RunningDaemon) -> None:
    result = ctl(*sock(robotad), "call", "daemon/status", '{"bogus": 1}')
    assert result.returncode == ExitCode.ERROR
    assert result.stdout == ""
    # One issue, which robotad's message states already: said once, located.
    (only,) = result.stderr.splitlines()
    assert only.startswith("robotactl: error -32602: invalid params: $.bogus: ")
    as_json = ctl(*sock(robotad), "--json", "call", "daemon/status", '{"bogus": 1}')
    issues = json.loads(as_json.stderr)["error"]["data"]["issues"]
    assert [issue["path"] for issue in issues] == ["$.bogus"]


def test_call_unknown_method(ctl: Ctl, robotad: RunningDaemon) -> None:
    result = ctl(*sock(robotad), "call", "no/such-method")
    assert result.returncode == ExitCode.ERROR
    assert result.stderr.startswith("robotactl: error -32601: ")


def test_bad_json_never_reaches_the_daemon(ctl: Ctl, robotad: RunningDaemon) -> None:
    result = ctl(*sock(robotad), "call", "daemon/shutdown", "{graceSeconds: 0}")
    assert result.returncode == ExitCode.USAGE
    assert "line 1, column 2" in result.stderr
    assert robotad.process.poll() is None  # the shutdown was never sent


# -- shutdown ----------------------------------------------------------------------------------


def test_shutdown_wait_returns_after_the_daemon_exited(ctl: Ctl, robotad: RunningDaemon) -> None:
    result = ctl(*sock(robotad), "shutdown", "--grace", "2", "--wait")
    assert result.returncode == 0, result.stderr
    assert result.stdout == "robotad has shut down\n"
    # --wait watched the process itself, so it is gone (a zombie for us to reap) already.
    assert robotad.process.poll() == 0
    assert not robotad.socket_path.exists()


def test_shutdown_json_prints_the_result(ctl: Ctl, robotad: RunningDaemon) -> None:
    result = ctl(*sock(robotad), "--json", "shutdown")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == {"ok": True}
    assert robotad.process.wait(PROCESS_TIMEOUT) == 0


def test_shutdown_with_no_daemon_starts_none(ctl: Ctl, socket_dir: Path) -> None:
    path = socket_dir / "robotad.sock"
    result = ctl("--socket", str(path), "shutdown")
    assert result.returncode == 0
    assert result.stdout == ""
    assert result.stderr == f"robotad is not running at {path}; nothing to shut down\n"
    assert not path.exists()
    as_json = ctl("--socket", str(path), "--json", "shutdown")
    assert (as_json.returncode, as_json.stderr) == (0, "")
    assert json.loads(as_json.stdout) == {"ok": True, "running": False}


# -- autostart ---------------------------------------------------------------------------------


def test_autostart_starts_a_daemon_that_outlives_the_command(
    ctl: Ctl, socket_dir: Path, stray_daemons: Pidfds
) -> None:
    path = socket_dir / "robotad.sock"
    first = ctl("--socket", str(path), "--json", "status")
    assert first.returncode == 0, first.stderr
    pid = json.loads(first.stdout)["pid"]
    stray_daemons.track(pid)
    assert json.loads(first.stdout)["socketPath"] == str(path)
    # The daemon is detached: its own session, still serving after robotactl exited.
    assert os.getsid(pid) == pid
    second = ctl("--socket", str(path), "--no-autostart", "--json", "status")
    assert json.loads(second.stdout)["pid"] == pid
    # Its output went to a private log beside the socket.
    log = socket_dir / "robotad.log"
    assert oct(log.stat().st_mode & 0o777) == oct(0o600)
    assert "serving" in log.read_text()
    stop = ctl("--socket", str(path), "shutdown", "--wait")
    assert stop.returncode == 0, stop.stderr
    assert not path.exists()


def test_autostart_creates_the_missing_socket_directory_private(
    ctl: Ctl, socket_dir: Path, stray_daemons: Pidfds
) -> None:
    path = socket_dir / "robota" / "robotad.sock"
    result = ctl("--socket", str(path), "--json", "status")
    assert result.returncode == 0, result.stderr
    stray_daemons.track(json.loads(result.stdout)["pid"])
    assert oct(path.parent.stat().st_mode & 0o777) == oct(0o700)
    assert ctl("--socket", str(path), "shutdown", "--wait").returncode == 0


def test_autostart_uses_the_default_socket(ctl: Ctl, stray_daemons: Pidfds) -> None:
    """No --socket: $XDG_RUNTIME_DIR/robota/robotad.sock (a temp dir in tests)."""
    result = ctl("--json", "status")
    assert result.returncode == 0, result.stderr
    status = json.loads(result.stdout)
    stray_daemons.track(status["pid"])
    assert status["socketPath"] == os.path.join(
        os.environ["XDG_RUNTIME_DIR"], "robota", "robotad.sock"
    )
    assert ctl("shutdown", "--wait").returncode == 0


def test_concurrent_autostarts_share_one_daemon(socket_dir: Path, stray_daemons: Pidfds) -> None:
    """Clients that find no daemon at the same moment take turns on the autostart lock:
    exactly one daemon is started and every client is served by it."""
    path = socket_dir / "robotad.sock"
    argv = [sys.executable, "-m", "robotactl", "--socket", str(path), "--json", "status"]
    clients = [
        subprocess.Popen(
            argv,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=child_environment(),
            cwd=REPO,
        )
        for _ in range(3)
    ]
    outputs = [client.communicate(timeout=PROCESS_TIMEOUT) for client in clients]
    assert [client.returncode for client in clients] == [0, 0, 0], outputs
    pids = {json.loads(out)["pid"] for out, _ in outputs}
    assert len(pids) == 1
    stray_daemons.track(pids.pop())
    # Only one robotad ever ran: one start in the shared log, no loser's complaint.
    log = (socket_dir / "robotad.log").read_text()
    lines = [line for line in log.strip().splitlines() if "robotad.sandbox: sandbox " not in line]
    assert len(lines) == 1, log
    assert Ctl()("--socket", str(path), "shutdown", "--wait").returncode == 0


def test_no_autostart_refuses_with_exit_1(ctl: Ctl, socket_dir: Path) -> None:
    path = socket_dir / "robotad.sock"
    result = ctl("--socket", str(path), "--no-autostart", "status")
    assert result.returncode == ExitCode.ERROR
    assert result.stderr == (
        f"robotactl: robotad is not running at {path} "
        "(start it with `robotad` or drop --no-autostart)\n"
    )
    assert not path.exists()


def test_no_autostart_from_the_environment(ctl: Ctl, socket_dir: Path) -> None:
    path = socket_dir / "robotad.sock"
    result = ctl("--socket", str(path), "call", "daemon/status", ROBOTA_NO_AUTOSTART="1")
    assert result.returncode == ExitCode.ERROR
    assert "robotad is not running at" in result.stderr
    # No flag was typed: the message names the variable that turned autostart off.
    assert "unset ROBOTA_NO_AUTOSTART" in result.stderr
    assert "--no-autostart" not in result.stderr
    assert not path.exists()


def test_the_flag_is_named_when_the_variable_says_no(ctl: Ctl, socket_dir: Path) -> None:
    """``ROBOTA_NO_AUTOSTART=0`` does not turn autostart off: the flag did, and is named."""
    path = socket_dir / "robotad.sock"
    result = ctl("--socket", str(path), "--no-autostart", "ls", ROBOTA_NO_AUTOSTART="0")
    assert result.returncode == ExitCode.ERROR
    assert "drop --no-autostart" in result.stderr
    assert "ROBOTA_NO_AUTOSTART" not in result.stderr


def test_a_relative_socket_is_taken_from_the_current_folder(
    ctl: Ctl, socket_dir: Path, stray_daemons: Pidfds
) -> None:
    """``ROBOTA_SOCKET=relative.sock``: robotactl and the robotad it starts (which runs
    elsewhere) agree on the folder it names, and every message names that folder."""
    result = ctl("--json", "status", ROBOTA_SOCKET="relative.sock", cwd=socket_dir)
    assert result.returncode == 0, result.stderr
    status = json.loads(result.stdout)
    stray_daemons.track(status["pid"])
    assert (socket_dir / "relative.sock").is_socket()
    refused = ctl("--no-autostart", "ls", ROBOTA_SOCKET="nothing.sock", cwd=socket_dir)
    assert f"robotad is not running at {socket_dir / 'nothing.sock'} " in refused.stderr
    assert ctl("--socket", str(socket_dir / "relative.sock"), "shutdown", "--wait").returncode == 0
    # A short name in a folder whose own path is longer than a socket path may be works: the
    # name is bound and connected to as given, from that folder.
    deep = socket_dir / ("d" * 60) / ("e" * 60)
    deep.mkdir(parents=True, mode=0o700)
    assert len(str(deep / "r.sock")) > 107
    result = ctl("--json", "--socket", "r.sock", "status", cwd=deep)
    assert result.returncode == 0, result.stderr
    stray_daemons.track(json.loads(result.stdout)["pid"])
    assert ctl("--socket", "r.sock", "shutdown", "--wait", cwd=deep).returncode == 0


def test_a_stale_socket_file_is_not_a_daemon(ctl: Ctl, socket_dir: Path) -> None:
    """A socket file nobody listens on (a killed daemon's) counts as no daemon."""
    import socket

    path = socket_dir / "robotad.sock"
    with socket.socket(socket.AF_UNIX) as orphan:
        orphan.bind(str(path))
    result = ctl("--socket", str(path), "--no-autostart", "status")
    assert result.returncode == ExitCode.ERROR
    assert "robotad is not running at" in result.stderr


def test_autostart_failure_relays_the_daemons_reason(ctl: Ctl, socket_dir: Path) -> None:
    """An unsafe socket directory: robotad refuses it, and robotactl shows robotad's words."""
    shared = socket_dir / "shared"
    shared.mkdir(mode=0o755)
    shared.chmod(0o755)
    result = ctl("--socket", str(shared / "robotad.sock"), "status")
    assert result.returncode == ExitCode.ERROR
    assert result.stderr.startswith("robotactl: robotad exited with status 1 before serving")
    assert "0755" in result.stderr
    assert str(shared) in result.stderr
    # No log was written into a directory other users can read.
    assert list(shared.iterdir()) == []


def test_autostart_relays_a_read_only_state_folder(
    ctl: Ctl, socket_dir: Path, tmp_path: Path
) -> None:
    """A state folder on a read-only file system: robotactl shows robotad's refusal, which
    names the folder and what to do, and no daemon is left behind."""
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    with small_tmpfs(state):
        remount_read_only(state)
        path = socket_dir / "robotad.sock"
        result = ctl("--socket", str(path), "status", ROBOTA_STATE_DIR=str(state))
    assert result.returncode == ExitCode.ERROR
    assert result.stderr.startswith(
        f"robotactl: robotad exited with status 1 before serving at {path}:\n"
    )
    assert (
        f"robotad cannot write to its state folder {state} (Read-only file system), where it "
        "keeps its sessions, journals and logs, so it does not start: remount it read-write, "
        "or point ROBOTA_STATE_DIR at a folder it can write"
    ) in result.stderr
    assert not path.exists()


def test_daemon_killed_mid_life_leaves_a_stale_socket_that_autostart_replaces(
    ctl: Ctl, robotad: RunningDaemon, stray_daemons: Pidfds
) -> None:
    robotad.process.send_signal(signal.SIGKILL)
    robotad.process.wait(PROCESS_TIMEOUT)
    assert robotad.socket_path.exists()  # left behind by the kill
    result = ctl(*sock(robotad), "--json", "status")
    assert result.returncode == 0, result.stderr
    pid = json.loads(result.stdout)["pid"]
    stray_daemons.track(pid)
    assert pid != robotad.pid
    assert ctl(*sock(robotad), "shutdown", "--wait").returncode == 0


# -- run_with_daemon: what a command's failure becomes -------------------------------------------


def _options(daemon: RunningDaemon) -> ClientOptions:
    return ClientOptions(socket=str(daemon.socket_path), autostart=False)


def test_rpc_errors_become_exit_statuses(robotad: RunningDaemon) -> None:
    """An RpcError escaping a command's body (through the connection's nursery) is shown as
    ``error CODE: message`` with exit 1, or 4 for an aborted turn."""

    async def unknown(peer: JsonRpcPeer) -> Any:
        return await peer.request("no/such-method", {})

    with pytest.raises(RpcFailed) as failed:
        run_with_daemon(_options(robotad), unknown)
    assert (failed.value.code, failed.value.exit_code) == (-32601, ExitCode.ERROR)

    async def aborted(peer: JsonRpcPeer) -> Any:
        await peer.request("daemon/status", {})
        raise TurnAborted("s1", "t1")

    with pytest.raises(TurnAbortedFailed) as stopped:
        run_with_daemon(_options(robotad), aborted)
    assert stopped.value.exit_code == ExitCode.ABORTED
    assert stopped.value.data == {"sessionId": "s1", "turnId": "t1"}


def test_command_failures_pass_through_unwrapped(robotad: RunningDaemon) -> None:
    async def refuse(peer: JsonRpcPeer) -> Any:
        raise CommandFailed("nope")

    with pytest.raises(CommandFailed, match="nope"):
        run_with_daemon(_options(robotad), refuse)


def test_body_result_is_returned(robotad: RunningDaemon) -> None:
    async def ask(peer: JsonRpcPeer) -> Any:
        return await peer.request("daemon/status", {})

    assert run_with_daemon(_options(robotad), ask)["pid"] == robotad.pid


def test_autostart_relays_a_config_error_with_its_key_path_and_what_to_do(
    ctl: Ctl, socket_dir: Path, tmp_path: Path
) -> None:
    """A config.toml robotad refuses: the command a user typed shows the file, each problem
    at its key path and what to do next, as text and as one --json document; no traceback,
    and no daemon is left behind."""
    config = tmp_path / "config.toml"
    config.write_text('[providers.local]\nkind = "openai"\nmodle = "qwen"\n')
    path = socket_dir / "robotad.sock"
    env = {"ROBOTA_CONFIG": str(config), "ROBOTA_STATE_DIR": str(tmp_path / "state")}
    result = ctl("--socket", str(path), "ls", **env)
    assert result.returncode == ExitCode.ERROR
    assert result.stderr.startswith(
        f"robotactl: robotad exited with status 1 before serving at {path}:\n"
    )
    assert f"invalid configuration {config}:\n" in result.stderr
    assert "    providers.local.modle: unknown key (this table takes: kind, " in result.stderr
    assert "fix the file, then start robotad again" in result.stderr
    assert "Traceback" not in result.stderr
    scripted = ctl("--socket", str(path), "--json", "ls", **env)
    assert scripted.returncode == ExitCode.ERROR
    assert scripted.stdout == ""
    message = json.loads(scripted.stderr)["error"]["message"]
    assert "providers.local.modle: unknown key" in message
    assert "fix the file, then start robotad again" in message
    assert not path.exists()
