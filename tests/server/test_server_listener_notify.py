"""Binding, activation detection, peer credentials, sd_notify and log rendering, in-process."""

from __future__ import annotations

import io
import logging
import os
import socket
import stat
from pathlib import Path

import pytest
import trio

from robotad.log import CompactFormatter, JournalFormatter, configure_logging, fields
from robotad.server.listener import (
    ActivationError,
    ListenerError,
    activated_listener,
    bind_listener,
)
from robotad.server.notify import Notifier
from robotad.server.peercred import peer_credentials
from tests.server.server_harness import descriptor_at


def test_socket_is_0600_from_birth_whatever_the_umask(tmp_path: Path) -> None:
    path = tmp_path / "robotad.sock"
    previous = os.umask(0)
    try:
        listener = bind_listener(path)
    finally:
        os.umask(previous)
    try:
        assert os.umask(previous) == previous  # the process umask was restored
        info = os.lstat(path)
        assert stat.S_ISSOCK(info.st_mode)
        assert stat.S_IMODE(info.st_mode) == 0o600
        assert listener.owned
        assert not listener.activated
        assert listener.sock.getsockopt(socket.SOL_SOCKET, socket.SO_ACCEPTCONN)
    finally:
        listener.sock.close()
        listener.remove_socket_file()
    assert not path.exists()


def test_stale_socket_is_replaced_but_other_files_are_not(tmp_path: Path) -> None:
    path = tmp_path / "robotad.sock"
    stale = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    stale.bind(os.fspath(path))
    stale.close()  # the file stays: a crashed daemon's leftover
    listener = bind_listener(path)
    listener.sock.close()
    listener.remove_socket_file()

    path.write_text("not a socket")
    with pytest.raises(ListenerError, match="not a socket"):
        bind_listener(path)
    assert path.read_text() == "not a socket"


def test_socket_file_removal_spares_a_replacement(tmp_path: Path) -> None:
    """Only the socket we bound is unlinked, never a file someone put there since."""
    path = tmp_path / "robotad.sock"
    listener = bind_listener(path)
    with listener.sock:  # still bound: its inode cannot be recycled for the replacement
        os.unlink(path)
        path.write_text("someone else's")
        listener.remove_socket_file()
    assert path.read_text() == "someone else's"


def test_activation_for_another_process_is_ignored_and_said(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """`sd_listen_fds`: variables naming another process (or none) are not ours; they are
    removed all the same, so that no child of robotad takes them for its own."""
    env = {"LISTEN_PID": str(os.getpid() + 1), "LISTEN_FDS": "1", "LISTEN_FDNAMES": "x"}
    with caplog.at_level(logging.WARNING, "robotad.server"):
        assert activated_listener(env) is None
        assert env == {}
        assert "LISTEN_PID names another process" in caplog.text
        env = {"LISTEN_FDS": "1"}
        assert activated_listener(env) is None
        assert env == {}
        assert "LISTEN_FDS is set without LISTEN_PID" in caplog.text
    assert activated_listener({}) is None


@pytest.mark.parametrize(
    ("variables", "problem"),
    [
        ({"LISTEN_FDS": "abc"}, "LISTEN_FDS is 'abc', not a number of sockets (1 or more)"),
        ({"LISTEN_FDS": "0"}, "LISTEN_FDS is '0', not a number of sockets (1 or more)"),
        ({"LISTEN_FDS": " 1"}, "LISTEN_FDS is ' 1', not a number of sockets (1 or more)"),
        ({}, "LISTEN_FDS is not set, not a number of sockets (1 or more)"),
    ],
)
def test_malformed_activation_addressed_to_us_is_refused(
    variables: dict[str, str], problem: str
) -> None:
    """LISTEN_PID names this process, so robotad was meant to serve a socket it cannot find:
    a located refusal, never a socket of its own in its place."""
    env = {"LISTEN_PID": str(os.getpid()), **variables}
    with pytest.raises(ActivationError) as caught:
        activated_listener(env)
    assert str(caught.value) == (
        f"socket activation: LISTEN_PID names this robotad (pid {os.getpid()}) but {problem}; "
        "robotad serves the socket it was handed or none: fix what started it (the "
        "robotad.socket unit, systemd-socket-activate), or unset LISTEN_PID and LISTEN_FDS to "
        "let it bind its own"
    )
    assert env == {}


@pytest.mark.parametrize("pid", ["abc", "0", "-5", "x" * 100])
def test_a_listen_pid_that_is_no_pid_is_refused(pid: str) -> None:
    with pytest.raises(ActivationError) as caught:
        activated_listener({"LISTEN_PID": pid, "LISTEN_FDS": "1"})
    shown = repr(pid if len(pid) <= 40 else pid[:40] + "…")
    expected = f"socket activation: LISTEN_PID is {shown}, not a process id;"
    assert str(caught.value).startswith(expected)


def test_activation_refuses_a_non_listening_fd3(tmp_path: Path) -> None:
    """fd 3 must be a listening Unix stream socket; anything else is a clear error."""
    a, b = socket.socketpair()
    with a, b, descriptor_at(3, a):
        env = {"LISTEN_PID": str(os.getpid()), "LISTEN_FDS": "1", "LISTEN_FDNAMES": "x"}
        with pytest.raises(ActivationError, match="not listening"):
            activated_listener(env)
        assert env == {}  # consumed: no child inherits the activation variables


def test_sockets_beyond_the_first_are_kept_from_children_and_said(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """LISTEN_FDS=2: robotad serves fd 3 and left fd 4 inheritable, unsaid (only the
    close_fds of every spawn kept it from commands). It is now close-on-exec, as
    `sd_listen_fds` makes every passed descriptor, and a warning says it is not served."""
    first = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    second = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    with first, second, descriptor_at(3, first), descriptor_at(4, second):
        first.bind(os.fspath(tmp_path / "first.sock"))
        first.listen()
        assert os.get_inheritable(4)
        env = {"LISTEN_PID": str(os.getpid()), "LISTEN_FDS": "2"}
        with caplog.at_level(logging.WARNING, "robotad.server"):
            listener = activated_listener(env)
        assert listener is not None
        assert listener.path == tmp_path / "first.sock"
        assert not listener.owned
        assert not os.get_inheritable(3)
        assert not os.get_inheritable(4)
        assert "LISTEN_FDS=2: robotad serves the first socket (fd 3) and ignores fd 4" in (
            caplog.text
        )
        listener.sock.detach()  # fd 3 is descriptor_at's to restore


def test_peer_credentials_name_the_connecting_process() -> None:
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    with a, b:
        creds = peer_credentials(a)
        assert creds.pid == os.getpid()
        assert creds.uid == os.geteuid()
        assert creds.is_same_user()
        assert not creds.is_same_user(os.geteuid() + 1)


@pytest.mark.parametrize("abstract", [False, True])
def test_notify_reaches_path_and_abstract_sockets(tmp_path: Path, abstract: bool) -> None:
    """``NOTIFY_SOCKET`` may be a path or an ``@abstract`` name; the variables are consumed."""
    receiver = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    if abstract:
        name = f"@robota-test-{os.getpid()}-{id(receiver)}"
        receiver.bind("\0" + name[1:])
    else:
        name = os.fspath(tmp_path / "notify")
        receiver.bind(name)
    receiver.settimeout(5)
    env = {"NOTIFY_SOCKET": name, "WATCHDOG_USEC": "4000000", "WATCHDOG_PID": str(os.getpid())}
    notifier = Notifier.from_environ(env)
    try:
        assert env == {}
        assert notifier.watchdog_interval == 2.0
        assert notifier.ready("serving")
        assert receiver.recv(256) == b"READY=1\nSTATUS=serving"
        assert notifier.stopping()
        assert receiver.recv(256) == b"STOPPING=1"
    finally:
        notifier.close()
        receiver.close()


def test_notifier_without_socket_is_silent() -> None:
    notifier = Notifier.from_environ({"WATCHDOG_USEC": "1000"})
    assert not notifier.enabled
    assert not notifier.ready()
    assert Notifier.from_environ({"NOTIFY_SOCKET": "relative/path"}).address is None
    other_pid = {"NOTIFY_SOCKET": "/x", "WATCHDOG_USEC": "1000", "WATCHDOG_PID": "1"}
    assert Notifier.from_environ(other_pid).watchdog_interval is None


async def test_watchdog_pings_every_half_interval(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    receiver = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    receiver.bind(os.fspath(tmp_path / "notify"))
    receiver.setblocking(False)
    notifier = Notifier(os.fspath(tmp_path / "notify"), watchdog_interval=5.0)
    try:
        with trio.move_on_after(12):  # pings at 0, 5 and 10 seconds
            await notifier.run_watchdog()
        pings = []
        while True:
            try:
                pings.append(receiver.recv(64))
            except BlockingIOError:
                break
        assert pings == [b"WATCHDOG=1"] * 3
    finally:
        notifier.close()
        receiver.close()


def _record(message: str, level: int = logging.INFO, **values: object) -> logging.LogRecord:
    record = logging.LogRecord("robotad.server", level, __file__, 1, message, None, None)
    for key, value in fields(**values).items():
        setattr(record, key, value)
    return record


def test_compact_log_line_carries_fields_quoted_when_needed() -> None:
    line = CompactFormatter().format(_record("serving", socket="/run/x.sock", note="two words"))
    assert line.endswith(' INFO robotad.server: serving socket=/run/x.sock note="two words"')
    assert line[:4].isdigit()
    assert "Z INFO" in line


def test_journal_lines_carry_the_priority_on_every_line() -> None:
    try:
        raise ValueError("boom")
    except ValueError:
        import sys

        record = _record("failed", logging.ERROR, conn=3)
        record.exc_info = sys.exc_info()
    lines = JournalFormatter().format(record).split("\n")
    assert lines[0] == "<3>robotad.server: failed conn=3"
    assert len(lines) > 2
    assert all(line.startswith("<3>") for line in lines)
    assert JournalFormatter().format(_record("x", logging.DEBUG)) == "<7>robotad.server: x"


def test_journal_format_only_when_journal_stream_names_stderr(tmp_path: Path) -> None:
    with open(tmp_path / "log", "w+") as stream:
        info = os.fstat(stream.fileno())
        journal = {"JOURNAL_STREAM": f"{info.st_dev}:{info.st_ino}"}
        handler = configure_logging("debug", stream=stream, environ=journal)
        assert isinstance(handler.formatter, JournalFormatter)
        handler = configure_logging("info", stream=stream, environ={"JOURNAL_STREAM": "1:2"})
        assert isinstance(handler.formatter, CompactFormatter)
        logging.getLogger("robotad.server").info("hello", extra=fields(a=1))
        logging.getLogger("robotad.server").debug("hidden")
        handler.flush()
        stream.seek(0)
        written = stream.read()
    assert written.count("\n") == 1
    assert "robotad.server: hello a=1" in written
    assert len(logging.getLogger("robotad").handlers) == 1  # reconfiguring replaced the handler
    with pytest.raises(ValueError, match="unknown log level"):
        configure_logging("loud", stream=io.StringIO())
