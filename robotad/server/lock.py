"""Single instance: an exclusive `flock` on ``robotad.lock`` beside the socket (PROTOCOL.md §1).

The lock is what makes a socket file "live": while a daemon holds it, nobody unlinks or rebinds
its socket; once the holder is gone (even killed with SIGKILL, since the kernel drops the lock
with the last descriptor) the socket left behind is stale and may be replaced.

The holder writes its pid into the lock file, so a second daemon can say who is in the way,
and marks it stopping once its shutdown begins (`mark_stopping`; the text is
`protocol.instance_lock`'s), so a daemon started meanwhile can wait for it instead of refusing.
That is a courtesy, not the claim: when the text cannot be written (a full disk under a new
state folder) the lock is held all the same and a second daemon says "pid unknown".
The lock file itself is never unlinked: removing it would let a third process lock a fresh
inode while a second still waits on the old one.
"""

from __future__ import annotations

import fcntl
import logging
import os
from pathlib import Path
from types import TracebackType

from protocol.instance_lock import LOCK_NAME, format_holder, parse_holder

__all__ = ["LOCK_NAME", "AlreadyRunning", "InstanceLock"]

log = logging.getLogger("robotad.server")


class AlreadyRunning(Exception):
    """Another daemon holds the lock. `pid` is the pid it wrote, or None when unreadable;
    `stopping` when it wrote that its shutdown has begun."""

    def __init__(self, lock_path: Path, pid: int | None, *, stopping: bool = False) -> None:
        who = f"pid {pid}" if pid is not None else "another process (pid unknown)"
        state = "still shutting down" if stopping else "already running"
        super().__init__(f"robotad is {state} ({who} holds {lock_path})")
        self.lock_path = lock_path
        self.pid = pid
        self.stopping = stopping


class InstanceLock:
    """The exclusive lock at `path`; `acquire()` takes it or raises `AlreadyRunning`.

    Usable as a context manager. The descriptor is close-on-exec, so tool subprocesses never
    inherit (and never extend) the daemon's claim. `release()` is idempotent.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd: int | None = None

    @property
    def held(self) -> bool:
        return self._fd is not None

    def acquire(self) -> None:
        """Take the lock without waiting and record this process's pid in the file.

        Raises `AlreadyRunning` naming the holder, or `OSError` when the file cannot be opened
        (e.g. it is a symbolic link: it is opened with ``O_NOFOLLOW``).
        """
        if self._fd is not None:
            return
        flags = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC
        fd = os.open(self.path, flags, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            pid, stopping = _read_holder(fd)
            os.close(fd)
            raise AlreadyRunning(self.path, pid, stopping=stopping) from None
        except BaseException:
            os.close(fd)
            raise
        try:
            os.fchmod(fd, 0o600)
        except BaseException:
            os.close(fd)
            raise
        self._fd = fd
        _record(fd, self.path, stopping=False)

    def mark_stopping(self) -> None:
        """Write that this holder's shutdown has begun (best effort; see the module doc)."""
        if self._fd is not None:
            _record(self._fd, self.path, stopping=True)

    def release(self) -> None:
        """Drop the lock (closing the descriptor releases it). The file stays in place."""
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)

    def __enter__(self) -> InstanceLock:
        self.acquire()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.release()


def _record(fd: int, path: Path, *, stopping: bool) -> None:
    """Write this process's pid (and `stopping`) into the held lock file; a failure is logged,
    never raised: the flock alone is the claim (a dead holder's text is truncated away first
    either way)."""
    try:
        os.ftruncate(fd, 0)
        os.pwrite(fd, format_holder(os.getpid(), stopping=stopping), 0)
    except OSError as exc:
        log.warning(
            "%s: cannot write its pid (%s); holding the lock all the same",
            path,
            exc.strerror or exc,
        )


def _read_holder(fd: int) -> tuple[int | None, bool]:
    """The pid the holder wrote and whether it is stopping; no pid if the file is empty
    (holder between lock and write)."""
    try:
        return parse_holder(os.pread(fd, 64, 0))
    except OSError:
        return None, False
