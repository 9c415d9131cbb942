"""Which process is robotad, numbered as robotactl's own pid namespace numbers it.

robotactl names robotad's process while it waits for an answer (`robotactl.unanswered`) and
watches it exit (``shutdown --wait``). Two numbers are at hand, and neither is right everywhere:

- the peer of the connection (``SO_PEERCRED``): the kernel numbers it in our pid namespace, but
  it is whoever called listen(2) — robotad when it bound its own socket, the service manager
  (``systemd --user``, which keeps running) when robotad was socket-activated;
- the pid robotad wrote into ``robotad.lock`` beside its socket (the one ``daemon/status``
  reports): robotad's own, but numbered in robotad's pid namespace, which is not ours when
  either of them runs in a container — there it names nobody, or somebody else.

So a number is used only once it is proven (decision 79): a pidfd is opened for it first (from
then on the number cannot pass to another process unnoticed), then /proc must show that
process holding the ``flock`` on the ``robotad.lock`` beside the socket — the claim only the
serving robotad has (`protocol.instance_lock`) — and the pidfd must still say it lives, so the
process /proc showed was the pidfd's. The peer is tried first, then the lock's number. When
neither is proven (robotad in a pid namespace we cannot see into, a /proc of another namespace
or none, no lock file beside the socket as we name it), robotactl names no process rather than
a wrong one, and never waits for one.
"""

from __future__ import annotations

import os
import select
import socket
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from protocol.instance_lock import LOCK_NAME, read_holder

if TYPE_CHECKING:
    from collections.abc import Iterator

__all__ = ["DaemonProcess", "daemon_pid", "find_daemon_process"]


@dataclass(frozen=True)
class DaemonProcess:
    """robotad's process: its `pid` in our namespace and a `pidfd` for it, which the caller
    closes (readable once the process has exited)."""

    pid: int
    pidfd: int


def find_daemon_process(
    socket_path: Path, peer: socket.socket | None = None
) -> DaemonProcess | None:
    """robotad serving at `socket_path`, proven as the module docstring says, or None.

    `peer` is a connection to it, whose ``SO_PEERCRED`` is the first number tried. Never
    raises for what it finds (or does not) on this machine."""
    if not _proc_is_ours():
        return None
    lock_path = Path(os.path.realpath(socket_path)).parent / LOCK_NAME
    try:
        lock = os.lstat(lock_path)
    except OSError:
        return None
    candidates = [_peer_pid(peer), read_holder(lock_path)[0]]
    for pid in dict.fromkeys(pid for pid in candidates if pid):
        found = _proven(pid, LOCK_NAME, lock)
        if found is not None:
            return found
    return None


def daemon_pid(socket_path: Path, peer: socket.socket | None = None) -> int | None:
    """The pid of `find_daemon_process`, for saying which process robotad is."""
    found = find_daemon_process(socket_path, peer)
    if found is None:
        return None
    os.close(found.pidfd)
    return found.pid


def _proc_is_ours() -> bool:
    """Whether /proc numbers processes as we do (a container may mount its host's, or none)."""
    try:
        return os.readlink("/proc/self") == str(os.getpid())
    except OSError:
        return False


def _peer_pid(peer: socket.socket | None) -> int | None:
    """The pid ``SO_PEERCRED`` gives for `peer` (0 when that process is outside our pid
    namespace), or None for no Unix socket."""
    if peer is None or peer.family != socket.AF_UNIX:
        return None
    try:
        creds = peer.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    except OSError:
        return None
    pid: int = struct.unpack("3i", creds)[0]
    return pid


def _proven(pid: int, name: str, lock: os.stat_result) -> DaemonProcess | None:
    """`pid` with a pidfd when that process holds the flock on the file `lock` describes,
    called `name`."""
    try:
        pidfd = os.pidfd_open(pid)
    except OSError:  # gone, or a kernel without pidfds (before Linux 5.3)
        return None
    if _holds_flock(pid, name, lock) and not _exited(pidfd):
        return DaemonProcess(pid, pidfd)
    os.close(pidfd)
    return None


def _holds_flock(pid: int, name: str, lock: os.stat_result) -> bool:
    """Whether one of process `pid`'s descriptors is the file `lock` describes and holds a
    ``flock`` on it, as /proc shows (another user's process shows nothing: False)."""
    return any(
        _has_flock(f"/proc/{pid}/fdinfo/{fd}")
        for fd in _descriptors_of(f"/proc/{pid}/fd", name, lock)
    )


def _descriptors_of(fd_dir: str, name: str, lock: os.stat_result) -> Iterator[str]:
    """The descriptors in `fd_dir` (a /proc/PID/fd) that are the file `lock` describes. Only
    those whose link ends in `name` are looked at: a stat of any other (a file on a hung FUSE
    mount) could block."""
    try:
        entries = os.listdir(fd_dir)
    except OSError:
        return
    for fd in entries:
        try:
            if os.path.basename(os.readlink(f"{fd_dir}/{fd}")) != name:
                continue
            found = os.stat(f"{fd_dir}/{fd}")
        except OSError:
            continue  # closed meanwhile
        if (found.st_dev, found.st_ino) == (lock.st_dev, lock.st_ino):
            yield fd


def _has_flock(fdinfo: str) -> bool:
    """Whether the descriptor whose /proc fdinfo is at `fdinfo` holds a ``flock`` (the kernel
    lists a lock there only for the open file that holds it, never for a waiter)."""
    try:
        with open(fdinfo, "rb") as info:
            text = info.read()
    except OSError:
        return False
    return any(line.startswith(b"lock:") and b" FLOCK " in line for line in text.splitlines())


def _exited(pidfd: int) -> bool:
    readable, _, _ = select.select([pidfd], [], [], 0)
    return bool(readable)
