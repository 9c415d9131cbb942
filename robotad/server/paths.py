"""The runtime directory that holds the socket and the lock (PROTOCOL.md §1).

The daemon creates a missing directory with mode 0700. An existing one is trusted only when it
is a real directory (not a symbolic link), owned by the daemon's user and closed to group and
others; anything else is refused with a `RuntimeDirError` that names the directory and what is
wrong with it, so the daemon exits before binding anything. The check never loosens or fixes an
existing directory: a directory someone else prepared is not ours to repair.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

__all__ = ["MAX_SOCKET_PATH_BYTES", "RuntimeDirError", "check_socket_path", "ensure_private_dir"]

#: ``sizeof(sun_path) - 1`` on Linux: the longest path `bind(2)` accepts for a Unix socket.
MAX_SOCKET_PATH_BYTES = 107


class RuntimeDirError(Exception):
    """The runtime directory cannot be used; the message names it and says why."""


def ensure_private_dir(directory: Path) -> Path:
    """Make sure `directory` exists, is owned by this user, and is mode 0700 or stricter.

    A missing directory is created 0700 (its missing parents too, each 0700), with the mode set
    explicitly rather than trusting the umask. Returns the directory. Raises `RuntimeDirError`
    for a symbolic link, a non-directory, a foreign owner or group/other permission bits.
    """
    try:
        info = os.lstat(directory)
    except FileNotFoundError:
        _create_private(directory)
        info = os.lstat(directory)
    except OSError as exc:
        raise RuntimeDirError(f"cannot inspect {directory}: {exc.strerror}") from exc
    _check_private(directory, info)
    return directory


def check_socket_path(path: Path) -> None:
    """Refuse a socket path `bind(2)` would reject for its length, with a clear message."""
    size = len(os.fsencode(path))
    if size > MAX_SOCKET_PATH_BYTES:
        raise RuntimeDirError(
            f"socket path {path} is {size} bytes long; Unix sockets allow at most "
            f"{MAX_SOCKET_PATH_BYTES} (choose a shorter --socket or ROBOTA_SOCKET)"
        )


def _create_private(directory: Path) -> None:
    parent = directory.parent
    if parent != directory and not os.path.lexists(parent):
        _create_private(parent)
    try:
        os.mkdir(directory, 0o700)
    except FileExistsError:
        return  # created concurrently; the caller's lstat check decides whether it is usable
    except OSError as exc:
        if exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
            raise RuntimeDirError(f"cannot create {directory}: {exc.strerror}") from exc
        raise RuntimeDirError(f"cannot create {directory}: {exc}") from exc
    os.chmod(directory, 0o700)


def _check_private(directory: Path, info: os.stat_result) -> None:
    directory = directory.absolute()  # named as a person finds it, never "."
    if stat.S_ISLNK(info.st_mode):
        raise RuntimeDirError(
            f"runtime directory {directory} is a symbolic link; refusing to use it "
            "(remove it or point --socket elsewhere)"
        )
    if not stat.S_ISDIR(info.st_mode):
        raise RuntimeDirError(f"runtime directory {directory} exists and is not a directory")
    uid = os.geteuid()
    private_elsewhere = (
        f"put the socket in a folder of your own instead, e.g. --socket "
        f"{directory / f'robota-{uid}' / 'robotad.sock'} (robotad creates a missing folder 0700)"
    )
    if info.st_uid != uid:
        raise RuntimeDirError(
            f"runtime directory {directory} is owned by uid {info.st_uid}, not by this user "
            f"(uid {uid}); refusing to use it: {private_elsewhere}"
        )
    mode = stat.S_IMODE(info.st_mode)
    if mode & 0o077:
        # Never advise changing a shared folder (/tmp, /run/user…): only a folder of one's own
        # may be tightened; for a shared one, the way out is a private subfolder.
        shared = bool(mode & (stat.S_ISVTX | stat.S_IWOTH))
        advice = (
            private_elsewhere
            if shared
            else f"run: chmod 700 {directory}, if nobody else should read it; or "
            + private_elsewhere.replace(" instead", "", 1)
        )
        raise RuntimeDirError(
            f"runtime directory {directory} has mode {mode:04o}; it must not be accessible to "
            f"group or others ({advice})"
        )
