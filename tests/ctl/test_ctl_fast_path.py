"""robotactl's fast path: one-shot commands talk through the blocking client, never trio.

Which modules a command loaded is read from a small wrapper around ``robotactl.console.main`` that
dumps ``sys.modules`` when the command ends. `call_daemon`'s failures are driven in-process
through a listener the test itself answers: the connection is accepted by the body, so what
"the daemon" says is written before the request goes out.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from protocol import jsonrpc
from protocol.blocking_client import BlockingClient
from protocol.errors import RpcError, SessionNotFound, TurnAborted
from protocol.framing import encode_frame
from robotactl.cli import (
    ClientOptions,
    CommandFailed,
    DaemonNotRunningFailed,
    RpcFailed,
    TurnAbortedFailed,
    call_daemon,
)
from robotactl.exit_codes import ExitCode

from .conftest import PROCESS_TIMEOUT, REPO, Ctl, Pidfds, RunningDaemon, child_environment
from .ctl_helpers import new_session, sock

_WRAPPER = """
import json, os, sys
from robotactl.console import main
try:
    main()
finally:
    with open(os.environ["MODULES_OUT"], "w") as out:
        json.dump(sorted(sys.modules), out)
"""


def ctl_with_modules(
    tmp_path: Path, *args: str, cwd: Path = REPO
) -> tuple[subprocess.CompletedProcess[str], set[str]]:
    """Run robotactl with `args`; its outcome and the modules it had loaded at the end."""
    record = tmp_path / f"modules-{len(list(tmp_path.glob('modules-*')))}.json"
    result = subprocess.run(
        [sys.executable, "-c", _WRAPPER, *args],
        capture_output=True,
        text=True,
        env=child_environment(MODULES_OUT=str(record)),
        cwd=cwd,
        timeout=PROCESS_TIMEOUT,
        check=False,
    )
    return result, set(json.loads(record.read_text()))


def trio_side(modules: set[str]) -> set[str]:
    """The modules only the streaming path needs: trio and the peer built on it."""
    return {
        m for m in modules if m.split(".")[0] == "trio" or m in ("protocol.peer", "protocol.client")
    }


@pytest.fixture
def work(tmp_path: Path) -> Path:
    directory = tmp_path / "work"
    directory.mkdir()
    return directory


# -- what loads --------------------------------------------------------------------------------


def test_status_and_ls_load_no_trio(robotad: RunningDaemon, tmp_path: Path) -> None:
    for args in (["status"], ["--json", "status"], ["ls"], ["--json", "ls"]):
        result, modules = ctl_with_modules(tmp_path, *sock(robotad), *args)
        assert result.returncode == 0, result.stderr
        assert trio_side(modules) == set(), args
        assert "protocol.blocking_client" in modules


def test_one_shot_session_commands_load_no_trio(
    robotad: RunningDaemon, tmp_path: Path, work: Path
) -> None:
    sid = new_session(Ctl(), robotad, work)
    commands = [
        ["call", "daemon/status"],
        ["show", "-s", sid],
        ["context", "-s", sid],
        ["mode", "-s", sid],
        ["history"],
        ["log", "-s", sid],
        ["abort", "-s", sid],
        ["new", "--cwd", str(work)],
    ]
    for args in commands:
        result, modules = ctl_with_modules(tmp_path, *sock(robotad), *args, cwd=work)
        assert result.returncode == 0, (args, result.stderr)
        assert trio_side(modules) == set(), args


def test_run_streams_through_trio(robotad: RunningDaemon, tmp_path: Path, work: Path) -> None:
    """The one kind of command that needs the peer loads it (the probe can see trio)."""
    sid = new_session(Ctl(), robotad, work)
    result, modules = ctl_with_modules(tmp_path, *sock(robotad), "run", "-s", sid, "hi")
    assert result.returncode == 0, result.stderr
    assert result.stdout == "echo: hi\n"
    assert {"trio", "protocol.peer"} <= trio_side(modules)


def test_autostart_on_the_fast_path(
    socket_dir: Path, tmp_path: Path, stray_daemons: Pidfds
) -> None:
    """A missing daemon is started (under trio, only then) and answers the same command;
    with it serving, the next command loads no trio."""
    path = socket_dir / "robotad.sock"
    first, started_with = ctl_with_modules(tmp_path, "--socket", str(path), "--json", "status")
    assert first.returncode == 0, first.stderr
    pid = json.loads(first.stdout)["pid"]
    stray_daemons.track(pid)
    assert "robotactl.autostart" in started_with
    second, modules = ctl_with_modules(tmp_path, "--socket", str(path), "--json", "status")
    assert json.loads(second.stdout)["pid"] == pid
    assert trio_side(modules) == set()
    assert "robotactl.autostart" not in modules
    stop, _ = ctl_with_modules(tmp_path, "--socket", str(path), "shutdown", "--wait")
    assert (stop.returncode, stop.stdout) == (0, "robotad has shut down\n")
    assert not path.exists()


# -- call_daemon's failures --------------------------------------------------------------------


@pytest.fixture
def listener(socket_dir: Path) -> Iterator[socket.socket]:
    """A socket that listens at ``socket_dir/robotad.sock`` and answers only what a test's
    body writes."""
    with socket.socket(socket.AF_UNIX) as listening:
        listening.bind(str(socket_dir / "robotad.sock"))
        listening.listen(1)
        yield listening


def options_for(listening: socket.socket) -> ClientOptions:
    return ClientOptions(socket=listening.getsockname(), autostart=False)


def answering(listening: socket.socket, stream: bytes) -> Callable[[BlockingClient], Any]:
    """A body that accepts the client's connection, has `stream` written to it, then asks
    for daemon/status."""

    def body(client: BlockingClient) -> Any:
        server, _ = listening.accept()
        with server:
            server.sendall(stream)
            server.shutdown(socket.SHUT_WR)
            return client.request("daemon/status")

    return body


def reply_error(error: RpcError) -> bytes:
    return encode_frame(jsonrpc.encode_error(1, error), "ndjson")


def test_an_rpc_error_is_shown_with_its_hint(listener: socket.socket) -> None:
    body = answering(listener, reply_error(SessionNotFound("abc")))
    with pytest.raises(RpcFailed) as failed:
        call_daemon(options_for(listener), body)
    assert (failed.value.code, failed.value.data) == (-32002, {"sessionId": "abc"})
    assert failed.value.exit_code == ExitCode.ERROR
    assert failed.value.hint is not None


def test_an_aborted_turn_exits_4(listener: socket.socket) -> None:
    body = answering(listener, reply_error(TurnAborted("s1", "t1")))
    with pytest.raises(TurnAbortedFailed) as failed:
        call_daemon(options_for(listener), body)
    assert failed.value.exit_code == ExitCode.ABORTED


def test_a_dropped_connection_says_so(listener: socket.socket) -> None:
    path = listener.getsockname()
    with pytest.raises(CommandFailed) as failed:
        call_daemon(options_for(listener), answering(listener, b""))
    assert failed.value.message.startswith(
        f"robotad at {path} closed the connection before answering (connection closed "
        "before the reply arrived); "
    )
    # Issue 14: no "another user" guess for a socket of one's own; where the log is.
    assert "another user" not in failed.value.message
    assert "journalctl --user -u robotad" in failed.value.message


def test_an_unusable_reply_says_so(listener: socket.socket) -> None:
    path = listener.getsockname()
    with pytest.raises(CommandFailed) as failed:
        call_daemon(options_for(listener), answering(listener, b"garbage\n"))
    assert failed.value.message.startswith(f"robotad at {path} sent an unusable reply: ")
    assert "unknown framing" in failed.value.message


def test_a_silent_daemon_times_out(listener: socket.socket) -> None:
    """Nobody accepts: the request sits in the socket, unanswered, until the bound."""
    path = listener.getsockname()

    def ask(client: BlockingClient) -> Any:
        return client.request("daemon/status")

    with pytest.raises(CommandFailed) as failed:
        call_daemon(options_for(listener), ask, timeout=0.05)
    assert failed.value.message == f"robotad at {path} did not answer daemon/status within 0.05 s"


def test_no_daemon_and_no_autostart_is_not_running(socket_dir: Path) -> None:
    path = socket_dir / "robotad.sock"
    options = ClientOptions(socket=str(path), autostart=False)
    with pytest.raises(DaemonNotRunningFailed) as failed:
        call_daemon(options, lambda client: client.request("daemon/status"))
    assert failed.value.socket_path == path
    assert failed.value.message == (
        f"robotad is not running at {path} (start it with `robotad` or drop --no-autostart)"
    )


def test_other_failures_pass_through_and_the_client_is_closed(robotad: RunningDaemon) -> None:
    seen: list[BlockingClient] = []

    def refuse(client: BlockingClient) -> Any:
        seen.append(client)
        raise CommandFailed("nope")

    options = ClientOptions(socket=str(robotad.socket_path), autostart=False)
    with pytest.raises(CommandFailed, match="nope"):
        call_daemon(options, refuse)
    assert seen[0].closed
