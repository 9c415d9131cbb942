"""`robotactl.daemon_process`: robotad's process is the one /proc shows holding the ``flock``
on the ``robotad.lock`` beside its socket, tried by the connection's peer, then by the pid the
lock names; any other number is no answer (decision 79).

A child Python process plays robotad's part (it holds the lock, or only opens it); each is
killed in a ``finally``.
"""

from __future__ import annotations

import os
import select
import socket
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from protocol.instance_lock import LOCK_NAME, format_holder
from robotactl.daemon_process import daemon_pid, find_daemon_process

from .conftest import PROCESS_TIMEOUT

#: A process with ``argv[1]`` open (``flock``ed when argv[2] is "lock") and listening at
#: ``argv[3]`` when given, until it is killed.
_HOLDER = """
import fcntl, os, socket, sys
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o600)
if sys.argv[2] == "lock":
    fcntl.flock(fd, fcntl.LOCK_EX)
if sys.argv[3:]:
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(sys.argv[3])
    listener.listen(1)
print("ready", flush=True)
sys.stdin.read()
"""


@contextmanager
def lock_process(
    path: Path, *, lock: bool = True, listen: Path | None = None
) -> Iterator[subprocess.Popen[str]]:
    """A child with the file at `path` open, holding its ``flock`` when `lock`, listening at
    `listen` when given (a connection there has it for its ``SO_PEERCRED`` peer)."""
    extra = [] if listen is None else [str(listen)]
    child = subprocess.Popen(
        [sys.executable, "-c", _HOLDER, str(path), "lock" if lock else "open", *extra],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None
        readable, _, _ = select.select([child.stdout], [], [], PROCESS_TIMEOUT)
        assert readable
        assert child.stdout.readline() == "ready\n"
        yield child
    finally:
        child.kill()
        child.wait()


def names(directory: Path, pid: int) -> None:
    """Write ``robotad.lock``'s text naming `pid`, as robotad does once it holds the lock."""
    (directory / LOCK_NAME).write_bytes(format_holder(pid))


def test_the_lock_holder_is_found_and_watched(socket_dir: Path) -> None:
    with lock_process(socket_dir / LOCK_NAME) as holder:
        names(socket_dir, holder.pid)
        found = find_daemon_process(socket_dir / "robotad.sock")
        assert found is not None
        try:
            assert found.pid == holder.pid
            readable, _, _ = select.select([found.pidfd], [], [], 0)
            assert not readable
            holder.kill()
            readable, _, _ = select.select([found.pidfd], [], [], PROCESS_TIMEOUT)
            assert readable  # the pidfd says it exited
        finally:
            os.close(found.pidfd)


def test_a_peer_holding_the_lock_is_found_whatever_the_lock_names(socket_dir: Path) -> None:
    """robotad in a pid namespace of its own: the lock's number is another process's here,
    the connection's peer is robotad as we number it."""
    sock = socket_dir / "robotad.sock"
    with lock_process(socket_dir / LOCK_NAME, listen=sock) as holder:
        names(socket_dir, os.getpid())
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as connection:
            connection.connect(str(sock))
            assert daemon_pid(sock, connection) == holder.pid
        assert daemon_pid(sock) is None


def test_a_number_whose_process_does_not_hold_the_lock_is_no_answer(socket_dir: Path) -> None:
    """Not the lock's number of a live process that holds nothing (this one), nor a peer that
    is not robotad (the service manager listening for it), nor a process that has the file
    open without the lock (a robotad waiting for its predecessor)."""
    sock = socket_dir / "robotad.sock"
    names(socket_dir, os.getpid())
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as listener:
        listener.bind(str(sock))
        listener.listen(1)
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as connection:
            connection.connect(str(sock))
            assert daemon_pid(sock, connection) is None
    with lock_process(socket_dir / LOCK_NAME, lock=False) as opener:
        names(socket_dir, opener.pid)
        assert daemon_pid(sock) is None


def test_no_lock_beside_the_socket_is_no_answer(socket_dir: Path, tmp_path: Path) -> None:
    with lock_process(tmp_path / LOCK_NAME) as holder:
        names(tmp_path, holder.pid)
        assert daemon_pid(socket_dir / "robotad.sock") is None
        assert daemon_pid(tmp_path / "robotad.sock") == holder.pid


def test_the_lock_is_looked_for_beside_the_socket_a_link_names(socket_dir: Path) -> None:
    """A socket reached through a symbolic link elsewhere: its lock is beside the socket."""
    real = socket_dir / "real"
    real.mkdir()
    (socket_dir / "link.sock").symlink_to(real / "robotad.sock")
    with lock_process(real / LOCK_NAME) as holder:
        names(real, holder.pid)
        assert daemon_pid(socket_dir / "link.sock") == holder.pid


def test_a_lock_held_by_another_file_of_the_same_name_is_no_answer(
    socket_dir: Path, tmp_path: Path
) -> None:
    with lock_process(tmp_path / LOCK_NAME) as holder:
        names(socket_dir, holder.pid)
        assert daemon_pid(socket_dir / "robotad.sock") is None
