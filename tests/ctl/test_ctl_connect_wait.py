"""Connecting to a robotad whose backlog is full (decision 82): both clients wait for a place,
telling their `ConnectWatcher` (`protocol.unix_connect`); robotactl shows the wait on a
terminal after a second and gives up after ``--answer-timeout``, as it does on a silence.

Every case runs against a listener that accepts nothing, its backlog filled (`full_backlog`).
The watchers are driven with the time they are told, so nothing here asserts on time; every
wait is bounded by a watcher that gives up, or a bound of a fraction of a second.
"""

from __future__ import annotations

import json
import re
import socket
from pathlib import Path
from typing import Any

import pytest
import trio

from protocol.blocking_client import open_blocking_connection
from protocol.client import open_connection
from robotactl.cli import ClientOptions, CommandFailed, call_daemon, run_with_daemon
from robotactl.daemon_errors import DaemonUnresponsive
from robotactl.exit_codes import ExitCode
from robotactl.unanswered import NOTICE_AFTER, ConnectWatch
from robotactl.waiting import TICK, WaitingLine

from .conftest import PROCESS_TIMEOUT, Ctl
from .ctl_helpers import Terminal, full_backlog
from .test_ctl_unanswered import SLOW_HINT, FakeTerminal, held_lock


class GiveUp(Exception):
    pass


class Watcher:
    """Records what it is told; asks again after `delay`, and on its `last` call gives up
    (or, with `then`, runs it first)."""

    def __init__(self, *, last: int, delay: float = 0.01, then: Any = None) -> None:
        self.delay = delay
        self.last = last
        self.then = then
        self.calls: list[float] = []
        self.ends = 0

    def waiting(self, waited: float) -> float:
        self.calls.append(waited)
        if len(self.calls) == self.last:
            if self.then is None:
                raise GiveUp
            self.then()
        return self.delay

    def ended(self) -> None:
        self.ends += 1


def stuck_message(path: Path, bound: str) -> str:
    """What robotactl says when the robotad at `path` (no process known) took no connection
    within `bound` seconds."""
    return (
        f"robotad at {path} accepted no connection within {bound} s (the connections waiting "
        "for it fill its socket's queue): it is stopped or stuck. `systemctl --user status "
        "robotad` shows which (`kill -CONT PID` resumes a stopped one); its log says what it "
        f"is doing (`journalctl --user -u robotad`, else {path.parent / 'robotad.log'}). "
        + SLOW_HINT
    )


# -- the clients -------------------------------------------------------------------------------


def test_the_blocking_client_tells_its_watcher_and_ends_as_it_says(socket_dir: Path) -> None:
    path = socket_dir / "robotad.sock"
    watcher = Watcher(last=3)
    with full_backlog(path), pytest.raises(GiveUp):
        open_blocking_connection(path, connect_timeout=None, connect_watcher=watcher)
    assert watcher.calls[0] == 0.0
    assert watcher.calls == sorted(watcher.calls)
    assert len(watcher.calls) == 3
    assert watcher.ends == 1


def test_a_place_that_frees_up_connects_the_waiting_client(socket_dir: Path) -> None:
    """robotad accepts one of the queued connections: the waiting connect takes its place."""
    path = socket_dir / "robotad.sock"
    with full_backlog(path) as listener:

        def accept_one() -> None:
            listener.accept()[0].close()

        watcher = Watcher(last=2, then=accept_one)
        with open_blocking_connection(
            path, connect_timeout=PROCESS_TIMEOUT, connect_watcher=watcher
        ) as client:
            assert client.socket.getpeername() == str(path)
    assert len(watcher.calls) == 2
    assert watcher.ends == 1


def test_without_a_watcher_the_bound_ends_the_wait(socket_dir: Path) -> None:
    path = socket_dir / "robotad.sock"
    with full_backlog(path), pytest.raises(TimeoutError, match=r"within 0\.05 s"):
        open_blocking_connection(path, connect_timeout=0.05)


async def test_the_trio_client_waits_for_a_place_instead_of_a_dead_socket(
    socket_dir: Path,
) -> None:
    """`trio.open_unix_socket` took the full backlog's EAGAIN for a connect in progress and
    handed back a socket that never connected; now the wait has its bound and its watcher."""
    path = socket_dir / "robotad.sock"
    with trio.fail_after(PROCESS_TIMEOUT), full_backlog(path):
        with pytest.raises(TimeoutError, match=r"within 0\.05 s"):
            async with open_connection(path, connect_timeout=0.05):
                pass
        watcher = Watcher(last=3)
        with pytest.raises(GiveUp):
            async with open_connection(path, connect_timeout=None, connect_watcher=watcher):
                pass
    assert watcher.calls[0] == 0.0
    assert len(watcher.calls) == 3
    assert watcher.ends == 1


async def test_a_cancelled_trio_connect_leaves_its_watcher_told_once(socket_dir: Path) -> None:
    """Cancelled (Ctrl-C) while the worker thread waits: the watcher is told at once that
    the wait ended (the thread, abandoned, tells it nothing more)."""
    path = socket_dir / "robotad.sock"
    token = trio.lowlevel.current_trio_token()
    with trio.fail_after(PROCESS_TIMEOUT), full_backlog(path), trio.CancelScope() as scope:
        watcher = Watcher(last=2, then=lambda: token.run_sync_soon(scope.cancel))
        async with open_connection(path, connect_timeout=None, connect_watcher=watcher):
            pass
    assert scope.cancelled_caught
    assert watcher.ends == 1


# -- robotactl's watch, step by step -----------------------------------------------------------


def test_a_terminal_is_shown_the_connect_wait_after_a_second(socket_dir: Path) -> None:
    path = socket_dir / "robotad.sock"
    stream = FakeTerminal()
    watch = ConnectWatch(path, bound=30.0, line=WaitingLine(stream, styled=False))
    with held_lock(socket_dir) as pid:
        assert watch.waiting(0.0) == NOTICE_AFTER
        assert stream.getvalue() == ""
        assert watch.waiting(1.0) == TICK
    shown = (
        f"waiting for robotad (pid {pid}) at {path} to accept the connection (it may be "
        "overloaded or stuck)… 1s"
    )
    assert stream.getvalue().endswith(shown)
    watch.ended()
    assert stream.getvalue().endswith("\r" + " " * len(f"⠋ {shown}") + "\r")


def test_the_connect_wait_is_given_up_on_at_the_bound(socket_dir: Path) -> None:
    path = socket_dir / "robotad.sock"
    watch = ConnectWatch(path, bound=0.5, line=None)
    assert watch.waiting(0.0) == 0.5
    with pytest.raises(DaemonUnresponsive) as given_up:
        watch.waiting(0.5)
    assert str(given_up.value) == stuck_message(path, "0.5")
    with held_lock(socket_dir) as pid, pytest.raises(DaemonUnresponsive) as named:
        ConnectWatch(path, bound=0.5, line=None).waiting(0.7)
    assert str(named.value).startswith(
        f"robotad (pid {pid}) at {path} accepted no connection within 0.5 s (the connections "
        "waiting for it fill its socket's queue): it is running, but stuck or overloaded; "
    )
    assert named.value.pid == pid


# -- robotactl's commands ----------------------------------------------------------------------


def test_a_one_shot_command_gives_up_on_the_connect_at_the_answer_bound(
    socket_dir: Path,
) -> None:
    path = socket_dir / "robotad.sock"
    options = ClientOptions(socket=str(path), autostart=False, answer_timeout=0.05)
    with full_backlog(path), pytest.raises(CommandFailed) as failed:
        call_daemon(options, lambda client: client.request("session/list", {}))
    assert failed.value.exit_code == ExitCode.ERROR
    assert failed.value.message == stuck_message(path, "0.05")


def test_a_streaming_command_gives_up_on_the_connect_alike(socket_dir: Path) -> None:
    """``run`` and its kin connect through trio: before, they got a socket that never
    connected and said robotad had stopped."""
    path = socket_dir / "robotad.sock"
    options = ClientOptions(socket=str(path), autostart=False, answer_timeout=0.05)

    async def body(peer: object) -> None:
        raise AssertionError("connected to a full backlog")

    with full_backlog(path), pytest.raises(CommandFailed) as failed:
        run_with_daemon(options, body)
    assert failed.value.message == stuck_message(path, "0.05")


@pytest.mark.parametrize("args", [["ls"], ["status"], ["run", "-s", "s-1", "hello"]])
def test_a_script_gets_one_error_line(ctl: Ctl, socket_dir: Path, args: list[str]) -> None:
    """Nothing before the error on a stderr that is no terminal; exit 1 — for a one-shot
    command, ``status`` (whose quick path hands over at once) and ``run`` (trio) alike."""
    path = socket_dir / "robotad.sock"
    with full_backlog(path):
        result = ctl("--socket", str(path), *args, ROBOTA_ANSWER_TIMEOUT="0.2")
    assert (result.returncode, result.stdout) == (ExitCode.ERROR, "")
    assert result.stderr == f"robotactl: {stuck_message(path, '0.2')}\n"


@pytest.mark.parametrize("json_mode", [False, True])
def test_a_terminal_sees_the_connect_wait_then_the_error_on_a_clean_line(
    socket_dir: Path, json_mode: bool
) -> None:
    """``⠹ waiting for robotad at PATH to accept the connection (it may be overloaded or
    stuck)… 1s`` after a second, cleared before the error; under --json only the error."""
    path = socket_dir / "robotad.sock"
    with full_backlog(path):
        args = ["--socket", str(path), "--answer-timeout", "1.5"]
        status, output = Terminal.ran(
            [*args, *(["--json"] if json_mode else []), "ls"], cwd=socket_dir, NO_COLOR="1"
        )
    assert status == ExitCode.ERROR
    if json_mode:
        assert output.startswith('{"error": ')  # nothing drawn before it
        (line,) = output.splitlines()
        assert json.loads(line) == {"error": {"message": stuck_message(path, "1.5")}}
        return
    waiting = re.escape(
        f"waiting for robotad at {path} to accept the connection (it may be overloaded or stuck)… "
    )
    assert re.search(waiting + r"\d+s", output), output
    assert re.search(r"\r {20,}\rrobotactl: robotad at ", output), output
    assert output.rstrip().endswith(SLOW_HINT)


def test_a_refused_or_missing_socket_is_unchanged(ctl: Ctl, socket_dir: Path) -> None:
    """Nobody listening is no wait: said at once, as before."""
    path = socket_dir / "robotad.sock"
    missing = ctl("--socket", str(path), "--no-autostart", "ls")
    with socket.socket(socket.AF_UNIX) as orphan:
        orphan.bind(str(path))
        refused = ctl("--socket", str(path), "--no-autostart", "ls")
    for result in (missing, refused):
        assert result.returncode == ExitCode.ERROR
        assert result.stderr.startswith(f"robotactl: robotad is not running at {path} ")
