"""Durable, owner-only file primitives every store in this package builds on (DESIGN decision 7).

- `ensure_private_dir`: folders are created 0700 with an explicit chmod, never trusting the umask;
  an existing path that is a symlink or not a directory is refused (`UnsafePath`).
- `atomic_write`: a temp file in the target's own folder (``O_CREAT|O_EXCL``, 0600), fully
  written and fsynced, renamed over the target, then the folder fsynced. A crash at any point
  leaves either the old file or the new one under the target's name, never a mix; leftover temp
  files start with ``.`` and end in ``.tmp`` so no reader mistakes them for data.
- `read_regular`: ``O_NOFOLLOW`` read of a regular file; a symlink, FIFO, folder or device in its
  place is `UnsafePath` (never followed, never blocked on); a missing file is `None`.
- `append_line`: one ``O_APPEND`` write of a whole line into an owner-only file.
- `create_exclusive`: content-addressed files made by exclusive link, never check-then-write.

All functions are blocking; async callers run them in a worker thread
(``trio.to_thread.run_sync``) or accept the brief block for small appends.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import stat
from pathlib import Path

__all__ = [
    "UnsafePath",
    "append_line",
    "atomic_write",
    "create_exclusive",
    "ensure_private_dir",
    "fsync_dir",
    "is_temp_name",
    "read_regular",
]

FILE_MODE = 0o600
DIR_MODE = 0o700
_TEMP_SUFFIX = ".tmp"
_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK


class UnsafePath(OSError):
    """Something other than the expected regular file or folder sits at a path we own
    (a planted symlink, a FIFO, a folder where a file belongs). Never followed or repaired."""


def ensure_private_dir(directory: Path) -> Path:
    """Create `directory` (and missing parents) mode 0700 whatever the umask; return it.

    An existing directory is used as it is. The folder itself must not be a symlink or a
    non-directory (`UnsafePath`); existing *parents* may be symlinks (a user's linked
    ``~/.local/state`` is theirs to choose).
    """
    try:
        info = os.lstat(directory)
    except FileNotFoundError:
        parent = directory.parent
        if parent != directory and not os.path.isdir(parent):
            ensure_private_dir(parent)
        with contextlib.suppress(FileExistsError):
            os.mkdir(directory, DIR_MODE)
            os.chmod(directory, DIR_MODE)
        info = os.lstat(directory)
    if stat.S_ISLNK(info.st_mode):
        raise UnsafePath(errno.ELOOP, "a symbolic link is in place of a storage folder")
    if not stat.S_ISDIR(info.st_mode):
        raise UnsafePath(errno.ENOTDIR, "a storage folder's path is not a folder")
    return directory


def fsync_dir(directory: Path) -> None:
    """Make a rename or link inside `directory` durable."""
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def is_temp_name(name: str) -> bool:
    """Whether a folder entry is one of our in-flight temp files (never a record)."""
    return name.startswith(".") and name.endswith(_TEMP_SUFFIX)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def _new_temp(directory: Path, stem: str) -> tuple[Path, int]:
    """An exclusively created 0600 temp file in `directory`, named so readers skip it."""
    while True:
        temp = directory / f".{stem}.{secrets.token_hex(8)}{_TEMP_SUFFIX}"
        try:
            fd = os.open(
                temp,
                os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                FILE_MODE,
            )
        except FileExistsError:
            continue
        os.fchmod(fd, FILE_MODE)  # the umask may have cleared bits; set exactly 0600
        return temp, fd


def atomic_write(path: Path, data: bytes) -> None:
    """Replace `path` with `data` durably and atomically (temp, fsync, rename, fsync folder).

    On any failure the temp file is removed and the previous content of `path` is untouched.
    A symlink at `path` is replaced by the new file, never written through.
    """
    directory = path.parent
    temp, fd = _new_temp(directory, path.name)
    try:
        try:
            _write_all(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.rename(temp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        raise
    fsync_dir(directory)


def create_exclusive(path: Path, data: bytes) -> bool:
    """Create `path` holding `data` unless a file of that name exists; True when we made it.

    For content-addressed files: the data is written to a temp file and hard-linked to `path`
    (link fails atomically when the name exists), so a reader never sees a partial file and two
    writers of the same content both succeed. An existing file is left unchanged.
    """
    directory = path.parent
    temp, fd = _new_temp(directory, path.name)
    try:
        try:
            _write_all(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
        try:
            os.link(temp, path, follow_symlinks=False)
        except FileExistsError:
            return False
        fsync_dir(directory)
        return True
    finally:
        with contextlib.suppress(OSError):
            os.unlink(temp)


def read_regular(path: Path, *, dir_fd: int | None = None) -> bytes | None:
    """The bytes of the regular file at `path`, or None when nothing is there.

    Never follows a symlink at the final component and never blocks on a FIFO: anything but a
    regular file is `UnsafePath`. Other failures (permissions, I/O) propagate as `OSError`.
    """
    try:
        fd = os.open(path, _READ_FLAGS, dir_fd=dir_fd)
    except FileNotFoundError:
        return None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise UnsafePath(errno.ELOOP, "a symbolic link is in place of a stored file") from None
        raise
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise UnsafePath(errno.EINVAL, "a stored file's path is not a regular file")
        chunks: list[bytes] = []
        while chunk := os.read(fd, max(info.st_size, 1 << 16)):
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def open_regular(path: Path) -> int | None:
    """A read descriptor of the regular file at `path` (caller closes), None when missing.

    Same refusals as `read_regular`."""
    try:
        fd = os.open(path, _READ_FLAGS)
    except FileNotFoundError:
        return None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise UnsafePath(errno.ELOOP, "a symbolic link is in place of a stored file") from None
        raise
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise UnsafePath(errno.EINVAL, "a stored file's path is not a regular file")
    return fd


def append_line(path: Path, line: bytes, *, durable: bool = False) -> None:
    """Append one whole line (a trailing newline is added) to the owner-only file at `path`.

    One ``O_APPEND`` write per line, so lines of concurrent appenders never interleave. If the
    file ends in a torn line (a crash mid-append), a newline is written first, so the torn line
    stays a single bad line instead of swallowing this one. `durable` fsyncs after the write.
    """
    fd = os.open(
        path,
        os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK,
        FILE_MODE,
    )
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise UnsafePath(errno.EINVAL, "an append-only file's path is not a regular file")
        if stat.S_IMODE(info.st_mode) != FILE_MODE and info.st_uid == os.geteuid():
            os.fchmod(fd, FILE_MODE)
        prefix = b""
        if info.st_size > 0 and os.pread(fd, 1, info.st_size - 1) != b"\n":
            prefix = b"\n"
        _write_all(fd, prefix + line.rstrip(b"\n") + b"\n")
        if durable:
            os.fsync(fd)
    finally:
        os.close(fd)
