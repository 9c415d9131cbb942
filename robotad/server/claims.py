"""One daemon a folder: the instance locks a starting daemon takes (PROTOCOL.md §1).

`claim_socket_folder` takes ``robotad.lock`` beside the socket (creating the folder 0700),
before anything is bound there; `claim_state_folder` the same lock in the state folder,
unless that is the socket's folder too, so that one daemon owns a state folder whatever its
socket. A lock held by a daemon that is shutting down (it marked it so, `mark_stopping`) is
waited for, at most `PREDECESSOR_WAIT` seconds: its socket is gone, and a daemon started
meanwhile (the next robotactl command after ``robotactl shutdown``) must not refuse as
"already running". Every lock taken is released by the caller's `ExitStack`; every refusal
is a `StartupError` fit to print as is. A folder robotad cannot write to (a read-only file
system, no write permission) is refused before its lock is tried, naming the folder, why
robotad must write there and what to do: a lock file left writable by an earlier run would
otherwise open, and every session write fail afterwards.
"""

from __future__ import annotations

import errno
import logging
import os
from contextlib import ExitStack, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import trio

from protocol.instance_lock import PREDECESSOR_WAIT
from robotad.log import fields
from robotad.server.errors import StartupError
from robotad.server.lock import LOCK_NAME, AlreadyRunning, InstanceLock
from robotad.server.paths import RuntimeDirError, ensure_private_dir
from robotad.storage import fsio

__all__ = ["claim_socket_folder", "claim_state_folder", "mark_stopping"]

log = logging.getLogger("robotad.server")

#: How often a lock held by a stopping daemon is tried again (flock has nothing to wait on).
_PREDECESSOR_POLL: Final = 0.05


async def claim_socket_folder(directory: Path, cleanup: ExitStack) -> InstanceLock:
    """The instance lock in the socket's folder (created 0700 when missing)."""
    try:
        ensure_private_dir(directory)
    except RuntimeDirError as exc:
        raise StartupError(str(exc)) from exc
    _refuse_unwritable(_SOCKET_FOLDER, directory)
    try:
        return await _hold(directory / LOCK_NAME, cleanup)
    except OSError as exc:
        raise _lock_refusal(_SOCKET_FOLDER, directory, exc) from exc


async def _hold(path: Path, cleanup: ExitStack, advice: str = "") -> InstanceLock:
    """Take the lock at `path` until `cleanup` runs, waiting while its holder is shutting
    down; else raise `StartupError` naming who holds it (with `advice` after), or the
    `OSError` of a lock file that cannot be opened."""
    lock = InstanceLock(path)
    waited: AlreadyRunning | None = None
    with trio.move_on_after(PREDECESSOR_WAIT):
        while True:
            try:
                lock.acquire()
            except AlreadyRunning as exc:
                if not exc.stopping:
                    raise StartupError(f"{exc}{advice}") from exc
                if waited is None:
                    log.info(
                        "robotad pid %s is shutting down; waiting for it to exit",
                        exc.pid,
                        extra=fields(lock=path),
                    )
                waited = exc
                await trio.sleep(_PREDECESSOR_POLL)
                continue
            cleanup.callback(lock.release)
            return lock
    raise StartupError(
        f"{waited} after {PREDECESSOR_WAIT:g} s of waiting for it to exit{advice}; "
        "try again once it has exited"
    )


async def claim_state_folder(
    state: Path, socket_lock: Path, cleanup: ExitStack
) -> InstanceLock | None:
    """One daemon a state folder: the instance lock again, in the state folder (unless that is
    the socket's folder too), so that a daemon started for another socket cannot open — and
    delete, and overwrite — the sessions, journals and logs another one holds. The lock, or
    None when it is the socket's."""
    try:
        fsio.ensure_private_dir(state)
    except OSError as exc:
        raise _unwritable(_STATE_FOLDER, state, exc) or StartupError(
            f"cannot use state folder {state}: {exc.strerror or exc}"
        ) from exc
    _refuse_unwritable(_STATE_FOLDER, state)
    path = state / LOCK_NAME
    if _same_file(path, socket_lock):
        return None
    try:
        return await _hold(
            path,
            cleanup,
            "; one robotad owns a state folder: stop that one, or give this one "
            "another (ROBOTA_STATE_DIR)",
        )
    except OSError as exc:
        raise _lock_refusal(_STATE_FOLDER, state, exc) from exc


@dataclass(frozen=True)
class _Folder:
    """A folder robotad must write to start: its name in a message, what it keeps there and
    where else it could be."""

    name: str
    keeps: str
    elsewhere: str


#: What to do about a folder robotad cannot write to, by the error that says so.
_FIXES: Final = {
    errno.EROFS: "remount it read-write",
    errno.EACCES: "make it writable for this user",
    errno.EPERM: "make it writable for this user",
}
_STATE_FOLDER: Final = _Folder(
    "state folder",
    "it keeps its sessions, journals and logs",
    "point ROBOTA_STATE_DIR at a folder it can write",
)
_SOCKET_FOLDER: Final = _Folder(
    "socket folder",
    "its socket and lock go",
    "give it a socket in a folder it can write (--socket, ROBOTA_SOCKET)",
)


def _refuse_unwritable(folder: _Folder, path: Path) -> None:
    """`StartupError` when this user cannot create files in `path`: a read-only file system,
    or a folder without write permission."""
    if os.access(path, os.W_OK | os.X_OK):
        return
    read_only = False
    with suppress(OSError):
        read_only = bool(os.statvfs(path).f_flag & os.ST_RDONLY)
    cause = errno.EROFS if read_only else errno.EACCES
    raise _cannot_write(folder, path, os.strerror(cause), _FIXES[cause])


def _lock_refusal(folder: _Folder, path: Path, error: OSError) -> StartupError:
    """Why the lock file in `path` cannot be opened, fit to print. The folder was writable a
    moment ago (`_refuse_unwritable`), so only a read-only file system is the folder's fault;
    a lock file of another owner, or a link planted in its place, is the file's."""
    if error.errno == errno.EROFS:
        return _cannot_write(folder, path, error.strerror or str(error), _FIXES[errno.EROFS])
    return StartupError(f"cannot open lock file {path / LOCK_NAME}: {error.strerror or error}")


def _unwritable(folder: _Folder, path: Path, error: OSError) -> StartupError | None:
    """The refusal of a folder robotad cannot write to (`error` says it is read-only or not
    this user's to write), naming it and what to do; None for any other error."""
    fix = _FIXES.get(error.errno or 0)
    if fix is None:
        return None
    return _cannot_write(folder, path, error.strerror or str(error), fix)


def _cannot_write(folder: _Folder, path: Path, reason: str, fix: str) -> StartupError:
    return StartupError(
        f"robotad cannot write to its {folder.name} {path} ({reason}), where {folder.keeps}, "
        f"so it does not start: {fix}, or {folder.elsewhere}"
    )


def _same_file(path: Path, other: Path) -> bool:
    with suppress(OSError):
        return os.path.samefile(path, other)
    return False


def mark_stopping(locks: list[InstanceLock]) -> None:
    """Say in every lock this daemon holds that its shutdown has begun (`Server.on_stopping`)."""
    for lock in locks:
        lock.mark_stopping()
