"""A one-shot command whose request robotad leaves unanswered (`robotactl.unanswered`,
decision 75): shown on a terminal after a second, given up on when robotad does not answer
``daemon/status`` on a second connection either; and ``close`` and ``shutdown --wait`` show
their waits on a terminal.

Most cases run against a socket that accepts every connection and never answers
(`silent_daemon`); one stops a real robotad with SIGSTOP. Every bound is the
``--answer-timeout`` (or ``ROBOTA_ANSWER_TIMEOUT``) of the command under test, set small.
"""

from __future__ import annotations

import contextlib
import fcntl
import io
import json
import os
import re
import signal
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from protocol import jsonrpc
from protocol.blocking_client import BlockingClient
from protocol.framing import encode_frame
from protocol.instance_lock import LOCK_NAME, format_holder
from robotactl.cli import ClientOptions, CommandFailed, call_daemon
from robotactl.daemon_errors import DaemonUnresponsive
from robotactl.exit_codes import ExitCode
from robotactl.unanswered import NOTICE_AFTER, AnswerWatch
from robotactl.waiting import TICK, WaitingLine

from .conftest import PROCESS_TIMEOUT, Ctl, RunningDaemon
from .ctl_helpers import Terminal, new_session, sock
from .pid_namespaces import contained_robotad, needs_unshare

#: What every give-up on a robotad whose process is not known to be stopped ends with.
SLOW_HINT = (
    "If it is only slow, wait longer with --answer-timeout SECONDS (or ROBOTA_ANSWER_TIMEOUT)"
)


class SilentDaemon:
    """Accepts every connection at `path` and never answers; holds them until closed."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.connections: list[socket.socket] = []
        self._listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._listener.bind(str(path))
        self._listener.listen(16)
        self._thread = threading.Thread(target=self._accept)
        self._thread.start()

    def _accept(self) -> None:
        with contextlib.suppress(OSError):  # the listener shut down: the test is over
            while True:
                self.connections.append(self._listener.accept()[0])

    def close(self) -> None:
        self._listener.shutdown(socket.SHUT_RDWR)  # wakes the accept
        self._thread.join(PROCESS_TIMEOUT)
        self._listener.close()
        for connection in self.connections:
            connection.close()
        self.path.unlink()


@contextmanager
def held_lock(directory: Path) -> Iterator[int]:
    """``directory/robotad.lock`` held by this process as a real robotad holds it (``flock``,
    its pid written in it); yields that pid."""
    fd = os.open(directory / LOCK_NAME, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        os.write(fd, format_holder(os.getpid()))
        yield os.getpid()
    finally:
        os.close(fd)


@contextmanager
def silent_daemon(directory: Path, *, holder: bool = False) -> Iterator[SilentDaemon]:
    """A `SilentDaemon` at ``directory/robotad.sock``; with `holder`, this process holds the
    ``robotad.lock`` beside it, as a real robotad does."""
    with contextlib.ExitStack() as stack:
        if holder:
            stack.enter_context(held_lock(directory))
        daemon = SilentDaemon(directory / "robotad.sock")
        stack.callback(daemon.close)
        yield daemon


class FakeTerminal(io.StringIO):
    def isatty(self) -> bool:
        return True


# -- the watch, step by step -------------------------------------------------------------------


def test_a_terminal_is_shown_the_wait_after_a_second_and_it_is_cleared(socket_dir: Path) -> None:
    stream = FakeTerminal()
    watch = AnswerWatch(
        socket_dir / "robotad.sock", bound=30.0, line=WaitingLine(stream, styled=False)
    )
    with held_lock(socket_dir) as pid:
        assert watch.waiting("session/list", 0.0) == NOTICE_AFTER
        assert stream.getvalue() == ""
        assert watch.waiting("session/list", 1.0) == TICK
    shown = f"waiting for robotad (pid {pid}) to answer session/list… 1s"
    assert stream.getvalue().endswith(shown)
    watch.ended()
    assert stream.getvalue().endswith("\r" + " " * len(f"⠋ {shown}") + "\r")


def test_a_lock_naming_a_process_that_does_not_hold_it_names_no_process(
    socket_dir: Path,
) -> None:
    """The pid in ``robotad.lock`` is robotad's in its own pid namespace: here (robotad in a
    container, or long gone and its number reused) it may name a live process that is not
    robotad, which is then never named, nor advised to be sent a signal (decision 79)."""
    (socket_dir / LOCK_NAME).write_bytes(format_holder(os.getpid()))
    stream = FakeTerminal()
    with silent_daemon(socket_dir) as daemon:
        watch = AnswerWatch(daemon.path, bound=0.05, line=WaitingLine(stream, styled=False))
        with pytest.raises(DaemonUnresponsive) as given_up:
            watch.waiting("session/list", 1.0)
    assert stream.getvalue().endswith("waiting for robotad to answer session/list… 1s")
    assert given_up.value.pid is None
    assert "kill -CONT PID" in str(given_up.value)


def test_without_a_terminal_the_watch_wakes_only_at_the_bound(socket_dir: Path) -> None:
    watch = AnswerWatch(socket_dir / "robotad.sock", bound=30.0, line=None)
    assert watch.waiting("session/list", 0.0) == 30.0
    assert watch.waiting("session/list", 12.5) == 17.5


def test_the_quick_paths_wait_counts_for_the_first_request_only(socket_dir: Path) -> None:
    """``status`` asks again what its quick path asked: that second is shown and counted."""
    stream = FakeTerminal()
    watch = AnswerWatch(
        socket_dir / "robotad.sock",
        bound=30.0,
        line=WaitingLine(stream, styled=False),
        waited_before=1.0,
    )
    assert watch.waiting("daemon/status", 0.0) == TICK
    assert stream.getvalue().endswith("waiting for robotad to answer daemon/status… 1s")
    watch.ended()
    assert watch.waiting("daemon/status", 0.0) == NOTICE_AFTER


def test_a_silent_robotad_is_given_up_on_at_the_bound(socket_dir: Path) -> None:
    with silent_daemon(socket_dir) as daemon:
        watch = AnswerWatch(daemon.path, bound=0.05, line=None)
        assert watch.waiting("session/get", 0.0) == 0.05
        with pytest.raises(DaemonUnresponsive) as given_up:
            watch.waiting("session/get", 0.05)
    assert given_up.value.socket_path == daemon.path
    assert given_up.value.pid is None
    # The quick path's wait counts: at or past the bound, the first request checks at once.
    with silent_daemon(socket_dir) as daemon:
        ahead = AnswerWatch(daemon.path, bound=0.05, line=None, waited_before=1.0)
        with pytest.raises(DaemonUnresponsive):
            ahead.waiting("daemon/status", 0.0)


def test_a_robotad_that_no_longer_listens_is_waited_for(socket_dir: Path) -> None:
    """Its socket gone, robotad is shutting down: the connection ends when it exits."""
    watch = AnswerWatch(socket_dir / "robotad.sock", bound=0.05, line=None)
    assert watch.waiting("session/close", 0.05) == 0.05


def reply(request_id: int, result: Any) -> bytes:
    return encode_frame(jsonrpc.encode_result(request_id, result), "ndjson")


def read_line(connection: socket.socket) -> bytes:
    received = b""
    while not received.endswith(b"\n"):
        chunk = connection.recv(4096)
        if not chunk:
            break
        received += chunk
    return received


def test_a_robotad_that_answers_on_a_second_connection_is_waited_for(socket_dir: Path) -> None:
    """A request robotad works on past the bound (a SessionStart hook, a close letting a turn
    end) while it answers daemon/status: the command waits and gets its answer."""
    path = socket_dir / "robotad.sock"
    seen: list[bytes] = []

    def busy_daemon(listener: socket.socket) -> None:
        with contextlib.suppress(OSError), listener.accept()[0] as request:
            seen.append(read_line(request))
            with listener.accept()[0] as probe:
                seen.append(read_line(probe))
                probe.sendall(reply(0, {"pid": 1}))
            request.sendall(reply(1, {"sessionId": "s"}))

    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as listener:
        listener.bind(str(path))
        listener.listen(4)
        listener.settimeout(PROCESS_TIMEOUT)
        thread = threading.Thread(target=busy_daemon, args=(listener,))
        thread.start()
        try:
            options = ClientOptions(socket=str(path), autostart=False, answer_timeout=0.05)

            def ask(client: BlockingClient) -> Any:
                return client.request("session/get", {"sessionId": "s"})

            assert call_daemon(options, ask) == {"sessionId": "s"}
        finally:
            thread.join(PROCESS_TIMEOUT)
    assert [json.loads(line)["method"] for line in seen] == ["session/get", "daemon/status"]


def test_call_daemon_gives_up_with_a_command_failure(socket_dir: Path) -> None:
    with silent_daemon(socket_dir) as daemon:
        options = ClientOptions(socket=str(daemon.path), autostart=False, answer_timeout=0.05)
        with pytest.raises(CommandFailed) as failed:
            call_daemon(options, lambda client: client.request("session/list", {}))
    assert failed.value.exit_code == ExitCode.ERROR
    assert failed.value.message.startswith(
        f"robotad at {daemon.path} did not answer session/list within 0.05 s"
    )


# -- robotactl as a script runs it -------------------------------------------------------------


@pytest.mark.parametrize("holder", [False, True])
def test_a_script_gets_one_error_line_naming_the_socket_and_what_to_try(
    ctl: Ctl, socket_dir: Path, holder: bool
) -> None:
    """Nothing before the error on a stderr that is no terminal; exit 1. With a lock naming
    a live, running process, that pid is named and the advice fits it."""
    pid = os.getpid()
    with silent_daemon(socket_dir, holder=holder) as daemon:
        result = ctl("--socket", str(daemon.path), "--answer-timeout", "0.2", "ls")
    assert result.returncode == ExitCode.ERROR
    assert result.stdout == ""
    log = socket_dir / "robotad.log"
    said = "did not answer session/list within 0.2 s, nor daemon/status on a second connection"
    advice = (
        f"its log says what it is doing (`journalctl --user -u robotad`, else {log}). " + SLOW_HINT
    )
    if holder:
        expected = (
            f"robotad (pid {pid}) at {daemon.path} {said}: it is running, but stuck or "
            f"overloaded; {advice}"
        )
    else:
        expected = (
            f"robotad at {daemon.path} {said}: it is stopped or stuck. `systemctl --user status "
            f"robotad` shows which (`kill -CONT PID` resumes a stopped one); {advice}"
        )
    assert result.stderr == f"robotactl: {expected}\n"


def test_json_gets_the_error_as_one_document(ctl: Ctl, socket_dir: Path) -> None:
    with silent_daemon(socket_dir) as daemon:
        result = ctl("--socket", str(daemon.path), "--answer-timeout", "0.2", "--json", "ls")
    assert result.returncode == ExitCode.ERROR
    assert result.stdout == ""
    (line,) = result.stderr.splitlines()
    message = json.loads(line)["error"]["message"]
    assert message.startswith(f"robotad at {daemon.path} did not answer session/list within")


def test_status_takes_the_bound_from_the_environment(ctl: Ctl, socket_dir: Path) -> None:
    """Plain ``status`` (the quick path, which hands over after a second) honours
    ROBOTA_ANSWER_TIMEOUT, and says so only once."""
    with silent_daemon(socket_dir) as daemon:
        result = ctl("--socket", str(daemon.path), "status", ROBOTA_ANSWER_TIMEOUT="0.2")
    assert result.returncode == ExitCode.ERROR
    assert result.stderr.startswith(
        f"robotactl: robotad at {daemon.path} did not answer daemon/status within 0.2 s, on "
        "this connection or a second one: it is stopped or stuck."
    )
    assert result.stderr.count("\n") == 1


@pytest.mark.parametrize(
    ("args", "env", "said"),
    [
        (["--answer-timeout", "0", "ls"], {}, "0.0 is not in the range x>=0.001"),
        (["--answer-timeout", "nan", "ls"], {}, "not a finite number"),
        (["ls"], {"ROBOTA_ANSWER_TIMEOUT": "soon"}, "'soon' is not a number of seconds"),
        (["ls", "--answer-timeout", "5"], {}, "robotactl --answer-timeout SECONDS ls …"),
    ],
)
def test_a_bad_bound_is_a_usage_error(
    ctl: Ctl, socket_dir: Path, args: list[str], env: dict[str, str], said: str
) -> None:
    result = ctl("--socket", str(socket_dir / "none.sock"), "--no-autostart", *args, **env)
    assert result.returncode == ExitCode.USAGE
    assert said in result.stderr


def test_help_names_the_option_and_its_variable(ctl: Ctl) -> None:
    result = ctl("--help")
    assert "--answer-timeout SECONDS" in result.stdout
    assert "ROBOTA_ANSWER_TIMEOUT" in result.stdout


# -- robotactl on a terminal -------------------------------------------------------------------


@pytest.mark.parametrize("json_mode", [False, True])
def test_a_terminal_sees_the_wait_then_the_error_on_a_clean_line(
    socket_dir: Path, json_mode: bool
) -> None:
    """``⠹ waiting for robotad (pid N) to answer session/list… 1s`` after a second, cleared
    before the error; under --json nothing but the error."""
    pid = os.getpid()
    with silent_daemon(socket_dir, holder=True) as daemon:
        args = ["--socket", str(daemon.path), "--answer-timeout", "1.5"]
        status, output = Terminal.ran(
            [*args, *(["--json"] if json_mode else []), "ls"], cwd=socket_dir, NO_COLOR="1"
        )
    assert status == ExitCode.ERROR
    if json_mode:
        assert "waiting for" not in output
        assert output.startswith('{"error": {"message": "robotad (pid')
        return
    assert re.search(rf"waiting for robotad \(pid {pid}\) to answer session/list… \d+s", output)
    assert re.search(r"\r {20,}\rrobotactl: robotad \(pid \d+\) at ", output), output
    assert output.rstrip().endswith(SLOW_HINT)


# -- a real robotad ----------------------------------------------------------------------------


def test_a_stopped_robotad_is_named_with_how_to_resume_it(ctl: Ctl, robotad: RunningDaemon) -> None:
    """SIGSTOP: the socket still takes connections, and nothing answers them."""
    path = robotad.socket_path
    robotad.process.send_signal(signal.SIGSTOP)
    try:
        listing = ctl(*sock(robotad), "--answer-timeout", "0.3", "ls")
        status = ctl(*sock(robotad), "status", ROBOTA_ANSWER_TIMEOUT="0.3")
    finally:
        robotad.process.send_signal(signal.SIGCONT)
    resume = f"it is stopped (Ctrl-Z or SIGSTOP); `kill -CONT {robotad.pid}` resumes it\n"
    assert (listing.returncode, listing.stdout) == (ExitCode.ERROR, "")
    assert listing.stderr == (
        f"robotactl: robotad (pid {robotad.pid}) at {path} did not answer session/list within "
        f"0.3 s, nor daemon/status on a second connection: {resume}"
    )
    assert (status.returncode, status.stdout) == (ExitCode.ERROR, "")
    assert status.stderr == (
        f"robotactl: robotad (pid {robotad.pid}) at {path} did not answer daemon/status within "
        f"0.3 s, on this connection or a second one: {resume}"
    )
    resumed = ctl(*sock(robotad), "--answer-timeout", "0.3", "--json", "ls")
    assert (resumed.returncode, resumed.stderr) == (0, "")


@needs_unshare
def test_a_stopped_robotad_in_a_container_is_named_as_this_namespace_numbers_it(
    ctl: Ctl, socket_dir: Path, tmp_path: Path
) -> None:
    """robotad is pid 1 in a pid namespace of its own, and its lock says 1: the process named,
    and the one `kill -CONT` is advised for, is robotad as we number it (the connection's peer),
    never our own pid 1 (decision 79)."""
    path = socket_dir / "robotad.sock"
    with contained_robotad(path, tmp_path / "robotad.log") as robotad:
        assert robotad.pid != 1
        os.kill(robotad.pid, signal.SIGSTOP)
        try:
            listing = ctl("--socket", str(path), "--answer-timeout", "0.3", "ls")
        finally:
            os.kill(robotad.pid, signal.SIGCONT)
    assert (listing.returncode, listing.stdout) == (ExitCode.ERROR, "")
    assert listing.stderr == (
        f"robotactl: robotad (pid {robotad.pid}) at {path} did not answer session/list within "
        "0.3 s, nor daemon/status on a second connection: it is stopped (Ctrl-Z or SIGSTOP); "
        f"`kill -CONT {robotad.pid}` resumes it\n"
    )


#: A turn that runs until it is aborted (or for a minute).
ENDLESS = [{"text": "never", "delayMs": 60_000}]


def start_turn(ctl: Ctl, robotad: RunningDaemon, session_id: str) -> None:
    params = {"sessionId": session_id, "prompt": "go on", "wait": False}
    started = ctl(*sock(robotad), "call", "session/run", json.dumps(params))
    assert started.returncode == 0, started.stderr


def test_close_shows_its_wait_for_the_turn_and_a_busy_robotad_is_waited_for(
    ctl: Ctl, robotad: RunningDaemon, work: Path
) -> None:
    """The close waits for the running turn; robotad, working, answers daemon/status beside
    it, so a bound far below the wait gives nothing up."""
    session_id = new_session(ctl, robotad, work, ENDLESS)
    start_turn(ctl, robotad, session_id)
    args = [*sock(robotad), "--answer-timeout", "0.2", "close", "-s", session_id]
    terminal = Terminal(args, cwd=work, NO_COLOR="1")
    try:
        terminal.expect(f"waiting for robotad (pid {robotad.pid}) to answer session/close…")
        aborted = ctl(*sock(robotad), "abort", "-s", session_id)
        assert aborted.returncode == 0, aborted.stderr
        status = terminal.finish()
    finally:
        terminal.kill()
    assert status == 0, terminal.output
    assert f"closed {session_id}" in terminal.output
    assert "did not answer" not in terminal.output


def test_shutdown_wait_shows_its_wait_for_the_exit(
    ctl: Ctl, robotad: RunningDaemon, work: Path
) -> None:
    """A turn that does not end keeps robotad for its grace (3 s), shown as a wait."""
    session_id = new_session(ctl, robotad, work, ENDLESS)
    start_turn(ctl, robotad, session_id)
    status, output = Terminal.ran(
        [*sock(robotad), "shutdown", "--wait", "--grace", "3"], cwd=work, NO_COLOR="1"
    )
    assert status == 0, output
    assert re.search(r"waiting for robotad to exit… \d+s", output), output
    assert re.search(r"\r {20,}\rrobotad has shut down", output), output
    assert robotad.process.wait(PROCESS_TIMEOUT) == 0
