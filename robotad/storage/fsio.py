"""Durable, owner-only file primitives every store here builds on (architecture decision 7).

- `ensure_private_dir`: folders are created 0700 with an explicit chmod, never trusting the umask;
  an existing path that is a symlink or not a directory is refused (`UnsafePath`).
  `ensure_durable_dir` is the same with each folder it creates made durable (its entry in its
  parent fsynced), for a folder a durable file is about to be created in.
- `atomic_write`: a temp file in the target's own folder (``O_CREAT|O_EXCL``, 0600), fully
  written and fsynced, renamed over the target, then the folder fsynced. A crash at any point
  leaves either the old file or the new one under the target's name, never a mix; leftover temp
  files start with ``.`` and end in ``.tmp`` so no reader mistakes them for data. The file
  tools replace users' files through it too, asking to keep an existing file's mode.
- `read_regular`: ``O_NOFOLLOW`` read of a regular file; a symlink, FIFO, folder or device in its
  place is `UnsafePath` (never followed, never blocked on); a missing file is `None`.
- `create_exclusive`: content-addressed files made by exclusive link, never check-then-write.
- `write_all`: every byte to a descriptor, whatever the kernel writes at a time.

All functions are blocking; async callers run them in a worker thread
(``trio.to_thread.run_sync``) or accept the brief block for small appends.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import stat
import threading
from pathlib import Path

__all__ = [
    "UnsafePath",
    "atomic_write",
    "create_exclusive",
    "end_of_last_line",
    "ensure_durable_dir",
    "ensure_private_dir",
    "exact_mode",
    "fsync_dir",
    "is_temp_name",
    "open_regular",
    "read_regular",
    "remove_temp_files",
    "write_all",
]

FILE_MODE = 0o600
DIR_MODE = 0o700
_NEW_FILE_MODE = 0o666  # what open() creates with, before the umask
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
    return _a_folder(directory, info)


def _a_folder(directory: Path, info: os.stat_result) -> Path:
    """`directory`, whose ``lstat`` is `info`, when it is a folder; `UnsafePath` otherwise."""
    if stat.S_ISLNK(info.st_mode):
        raise UnsafePath(errno.ELOOP, "a symbolic link is in place of a storage folder")
    if not stat.S_ISDIR(info.st_mode):
        raise UnsafePath(errno.ENOTDIR, "a storage folder's path is not a folder")
    return directory


#: Held while `ensure_durable_dir` looks for a folder (an ``lstat``) or makes one (a ``mkdir``),
#: never while it syncs: a thread syncing a folder it made holds back no other thread's look.
_making_folders = threading.Lock()

#: The folders `ensure_durable_dir` has made whose entry is not durable yet (as spelled),
#: each with an event set once it is or once it was removed again: a thread finding one of
#: them, or a folder in one, waits for that event, so it returns only once the folder's
#: entry is durable. Guarded by `_making_folders`.
_unsettled: dict[Path, threading.Event] = {}


def ensure_durable_dir(directory: Path) -> Path:
    """`ensure_private_dir`, each folder it creates made durable before it returns: the folder
    holding it is fsynced, so its entry there survives a power cut. A file's fsync and its
    folder's (`create_exclusive`) make the file's name durable, not the folder's own name in
    its parent: without this, a folder made just before would vanish with every file in it.

    A folder that exists costs one ``lstat``, as with `ensure_private_dir`, and syncs nothing;
    it waits only when another thread of this process has just made it, or a folder holding
    it, and is syncing that (`_unsettled`), never for an unrelated folder's sync.
    All or nothing: when a sync fails, the folders made are removed again (those still empty)
    before the error is raised, so no later call takes a folder whose entry is not durable
    for one that is."""
    while True:
        with _making_folders:
            syncing = _being_made(directory)
            if syncing is None:
                try:
                    info = os.lstat(directory)
                except FileNotFoundError:
                    made = _make(directory)
                    break
                return _a_folder(directory, info)
        syncing.wait()  # then look again: a sync that failed removed the folder
    _make_durable(made)
    return directory


def _being_made(directory: Path) -> threading.Event | None:
    """The event of `directory`, or of a folder holding it, that is being made durable."""
    if not _unsettled:
        return None
    for folder in (directory, *directory.parents):
        syncing = _unsettled.get(folder)
        if syncing is not None:
            return syncing
    return None


def _make(directory: Path) -> list[Path]:
    """`directory` and its missing parents made (`ensure_private_dir`), each noted as not
    durable yet (`_unsettled`); they are returned innermost first."""
    missing = [directory]
    probe = directory.parent
    while probe.parent != probe and not os.path.lexists(probe):
        missing.append(probe)
        probe = probe.parent
    ensure_private_dir(directory)
    for made in missing:
        _unsettled[made] = threading.Event()
    return missing


def _make_durable(missing: list[Path]) -> None:
    """The folder holding each folder of `missing` (innermost first) fsynced, outermost
    first; then whoever waits for them is let go (`ensure_durable_dir`)."""
    try:
        for made in reversed(missing):
            fsync_dir(made.parent)
    except BaseException:
        for made in missing:  # innermost first
            with contextlib.suppress(OSError):
                os.rmdir(made)
        raise
    finally:
        with _making_folders:
            for made in missing:
                _unsettled.pop(made).set()


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


def end_of_last_line(fd: int, size: int) -> int:
    """The offset just past the last newline before `size` in the file `fd` (0 when there is
    none): where a line-per-record file ends once an unfinished last line is cut away."""
    end = size
    while end > 0:
        start = max(0, end - (1 << 16))
        found = os.pread(fd, end - start, start).rfind(b"\n")
        if found >= 0:
            return start + found + 1
        end = start
    return 0


def remove_temp_files(directory: Path) -> int:
    """Remove the temp files a writer killed mid-write left in `directory` (none when it does
    not exist); how many. Only while nothing writes there."""
    try:
        names = os.listdir(directory)
    except FileNotFoundError:
        return 0
    removed = 0
    for name in names:
        if is_temp_name(name):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(directory / name)
                removed += 1
    return removed


def exact_mode(fd: int, mode: int, info: os.stat_result | None = None) -> None:
    """Give the open file `fd` exactly the permission bits `mode`, unless it has them already
    (`info`: its ``fstat``, when the caller holds one). A file this process just created has
    them whenever the umask spared the owner's bits — nearly always — and then nothing is
    written: on ext4 a ``chmod`` is an inode change the next fsync must journal, about
    0.2 ms of a turn here."""
    if info is None:
        info = os.fstat(fd)
    if stat.S_IMODE(info.st_mode) != mode:
        os.fchmod(fd, mode)


def write_all(fd: int, data: bytes) -> None:
    """Write every byte of `data` to `fd`, however short the kernel's writes."""
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def _new_temp(directory: Path, name: str, create_mode: int) -> tuple[Path, int]:
    """An exclusively created temp file in `directory`, named so readers skip it."""
    while True:
        # The name is cut so the temp's stays well under NAME_MAX whatever the target's length.
        temp = directory / f".{name[:160]}.{secrets.token_hex(8)}{_TEMP_SUFFIX}"
        try:
            fd = os.open(
                temp,
                os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                create_mode,
            )
        except FileExistsError:
            continue
        return temp, fd


def _write_temp(directory: Path, name: str, data: bytes, mode: int | None) -> Path:
    """A temp file in `directory` holding `data`, fsynced and closed (`mode` as for
    `atomic_write`). On any failure it is removed and the exception propagates."""
    temp, fd = _new_temp(directory, name, FILE_MODE if mode is not None else _NEW_FILE_MODE)
    try:
        try:
            write_all(fd, data)
            if mode is not None:
                # Set exactly, whatever the umask cleared; after the write, because a write
                # clears set-id bits an existing file may have had.
                exact_mode(fd, mode)
            os.fsync(fd)
        finally:
            os.close(fd)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        raise
    return temp


def atomic_write(
    path: Path, data: bytes, *, mode: int | None = FILE_MODE, strict_dir_sync: bool = True
) -> None:
    """Replace `path` with `data` durably and atomically (temp, fsync, rename, fsync folder).

    On any failure the temp file is removed and the previous content of `path` is untouched.
    A symlink at `path` is replaced by the new file, never written through.

    `mode` is the new file's exact permission bits: 0600 by default, as every store here
    wants; None gives it what a newly created file gets (0666 under the process umask).
    With `strict_dir_sync` False a folder that cannot be opened or fsynced after the rename is
    not reported: the new content is already in place, and a writer into folders it does not
    own (the file tools) must not call that write failed.
    """
    directory = path.parent
    temp = _write_temp(directory, path.name, data, mode)
    try:
        os.rename(temp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        raise
    if strict_dir_sync:
        fsync_dir(directory)
    else:
        with contextlib.suppress(OSError):
            fsync_dir(directory)


def create_exclusive(path: Path, data: bytes) -> bool:
    """Create `path` holding `data` unless a file of that name exists; True when we made it.

    For content-addressed files: the data is written to a temp file and hard-linked to `path`
    (link fails atomically when the name exists), so a reader never sees a partial file and two
    writers of the same content both succeed. An existing file is left unchanged. All or
    nothing: when the folder cannot be synced after the link (an I/O error, no descriptor
    left to open it), the name made is taken back before the error is raised.
    """
    directory = path.parent
    temp = _write_temp(directory, path.name, data, FILE_MODE)
    try:
        try:
            os.link(temp, path, follow_symlinks=False)
        except FileExistsError:
            return False
        try:
            fsync_dir(directory)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(path)
            raise
        return True
    finally:
        with contextlib.suppress(OSError):
            os.unlink(temp)


def read_regular(path: Path, *, dir_fd: int | None = None) -> bytes | None:
    """The bytes of the regular file at `path`, or None when nothing is there.

    Never follows a symlink at the final component and never blocks on a FIFO: anything but a
    regular file is `UnsafePath`. Other failures (permissions, I/O) propagate as `OSError`.
    """
    fd = open_regular(path, dir_fd=dir_fd)
    if fd is None:
        return None
    try:
        size = os.fstat(fd).st_size
        chunks: list[bytes] = []
        while chunk := os.read(fd, max(size, 1 << 16)):
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def open_regular(path: Path, *, dir_fd: int | None = None) -> int | None:
    """A read descriptor of the regular file at `path` (caller closes), None when missing.

    Same refusals as `read_regular`."""
    try:
        fd = os.open(path, _READ_FLAGS, dir_fd=dir_fd)
    except FileNotFoundError:
        return None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise UnsafePath(errno.ELOOP, "a symbolic link is in place of a stored file") from None
        raise
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise UnsafePath(errno.EINVAL, "a stored file's path is not a regular file")
    except BaseException:
        os.close(fd)
        raise
    return fd
