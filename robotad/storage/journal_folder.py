"""The journal's blocking file work: one session's folder, locked, through its descriptor.

`JournalFolder.acquire(directory)` creates the folder (0700, new entries made durable), takes
an exclusive, non-blocking ``flock`` on its descriptor (`FolderLocked` when another writer holds
it) and repairs torn tails. Every execution file is then opened relative to that descriptor with
``O_NOFOLLOW``, so a planted symlink is refused (`fsio.UnsafePath`), never followed.

An append writes the whole line with ``O_APPEND``, cuts a partial write back off, and when
durable fsyncs the file and, for a file whose folder entry is not durable yet, the folder. An
fsync (or a cut-back) that fails raises `DurabilityLost`: the file's state is unknown. A file
this writer did not know of raises `Appeared` (its records must be read first). Everything here
blocks: `journal.FileExecutionJournal` runs it inline only where that is cheaper than a worker
thread's round trip.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import logging
import os
import stat
from pathlib import Path

from . import fsio
from .ids import is_safe_session_id

log = logging.getLogger("robotad.storage")

__all__ = ["SUFFIX", "Appeared", "DurabilityLost", "FolderLocked", "JournalFolder", "reason"]

SUFFIX = ".jsonl"
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_APPEND_FLAGS = os.O_WRONLY | os.O_APPEND | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
_REPAIR_FLAGS = os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK


class FolderLocked(Exception):
    """Another writer holds the folder's lock."""


class DurabilityLost(OSError):
    """An fsync, or cutting a partial write back off, failed: the file's state is unknown."""


def reason(exc: OSError) -> str:
    """The errno text of a failure (never a path, never content)."""
    return exc.strerror or errno.errorcode.get(exc.errno or 0, "I/O error")


def _unsafe(exc: OSError) -> OSError:
    if exc.errno == errno.ELOOP:
        return fsio.UnsafePath(errno.ELOOP, "a symbolic link is in place of a journal file")
    return exc


class JournalFolder:
    """Blocking work on one session's journal folder through its held, flock'ed descriptor.

    `staged` names the files holding staged lines not synced yet, `unsynced` the files a
    staged append created whose folder entry is not durable yet.
    """

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.staged: set[str] = set()
        self.unsynced: set[str] = set()
        #: The execution files in the folder, as listed when it was locked and kept up to
        #: date by this writer (the only one): a new execution's first append creates its file
        #: at once, and its idempotency check reads nothing.
        self.known: set[str] = set()

    @classmethod
    def acquire(cls, directory: Path) -> JournalFolder:
        """Create the folder (0700, new entries made durable), lock it, repair torn tails."""
        fsio.ensure_durable_dir(directory)
        fd = os.open(directory, _DIR_FLAGS)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise FolderLocked(str(directory)) from None
        except BaseException:
            os.close(fd)
            raise
        folder = cls(fd)
        try:
            for name in folder.names():
                folder.repair(name)
            folder.known = set(folder.names())
        except BaseException:
            folder.release()
            raise
        return folder

    def release(self) -> None:
        os.close(self.fd)  # drops the flock

    def names(self) -> list[str]:
        """Execution file names, sorted; anything else in the folder is ignored."""
        return sorted(
            name
            for name in os.listdir(self.fd)
            if name.endswith(SUFFIX) and is_safe_session_id(name[: -len(SUFFIX)])
        )

    def names_by_age(self) -> list[str]:
        """Execution file names, least recently written first (name breaks ties)."""
        aged = []
        for name in self.names():
            try:
                written = os.stat(name, dir_fd=self.fd, follow_symlinks=False).st_mtime_ns
            except FileNotFoundError:
                continue
            aged.append((written, name))
        return [name for _, name in sorted(aged)]

    def repair(self, name: str) -> None:
        """Cut an unterminated final line (a write that never returned); drop an empty file.
        Non-regular files are left for `read` to report."""
        try:
            fd = os.open(name, _REPAIR_FLAGS, dir_fd=self.fd)
        except OSError as exc:
            if exc.errno in (errno.ELOOP, errno.EISDIR, errno.ENXIO):
                return
            raise
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):
                return
            keep = info.st_size
            if keep and os.pread(fd, 1, keep - 1) != b"\n":
                keep = fsio.end_of_last_line(fd, keep)
                os.ftruncate(fd, keep)
                os.fsync(fd)
                # Said, not silent: what a crash cut off never returned to anyone, but a
                # file cut by hand (or by a failing disk) loses a record somebody saw.
                log.warning(
                    "journal %s: removed %d bytes of an unfinished last line (an append that "
                    "never completed: robotad stopped while writing it)",
                    name,
                    info.st_size - keep,
                )
        finally:
            os.close(fd)
        if keep == 0:
            os.unlink(name, dir_fd=self.fd)
            os.fsync(self.fd)

    def read(self, name: str) -> bytes | None:
        try:
            fd = os.open(name, _READ_FLAGS, dir_fd=self.fd)
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise _unsafe(exc) from None
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise fsio.UnsafePath(errno.EINVAL, "a journal file's path is not a regular file")
            chunks: list[bytes] = []
            while chunk := os.read(fd, 1 << 20):
                chunks.append(chunk)
            return b"".join(chunks)
        finally:
            os.close(fd)

    def append(self, name: str, line: bytes, *, durable: bool = True) -> None:
        """Append `line`; when `durable`, fsync the file, then the folder if the file's entry
        is not durable yet (this call or a staged one created it). A failed write is cut back
        off; a file this call created is removed again."""
        created = name not in self.known
        try:
            if created:
                flags = _APPEND_FLAGS | os.O_CREAT | os.O_EXCL
                fd = os.open(name, flags, fsio.FILE_MODE, dir_fd=self.fd)
            else:
                fd = os.open(name, _APPEND_FLAGS, dir_fd=self.fd)
        except FileExistsError:
            self.known.add(name)  # made behind our back: its records must be read first
            raise Appeared(name) from None
        except FileNotFoundError:
            if created:
                raise
            self.known.discard(name)  # removed behind our back: a new file is made
            return self.append(name, line, durable=durable)
        except OSError as exc:
            raise _unsafe(exc) from None
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):
                raise fsio.UnsafePath(errno.EINVAL, "a journal file's path is not a regular file")
            if created:
                fsio.exact_mode(fd, fsio.FILE_MODE, info)  # 0600, whatever the umask cleared
            try:
                fsio.write_all(fd, line)
            except OSError:
                _cut_back(fd, info.st_size)
                raise
            if durable:
                _sync(fd)
        except BaseException:
            os.close(fd)
            if created:
                with contextlib.suppress(OSError):
                    os.unlink(name, dir_fd=self.fd)
            raise
        os.close(fd)
        if created:
            self.known.add(name)
            self.unsynced.add(name)
        if durable:
            self.staged.discard(name)
            self._sync_entry(name)
        else:
            self.staged.add(name)

    def sync(self, name: str) -> None:
        """Make the staged lines of `name` durable (nothing to do when it has none)."""
        if name not in self.staged:
            return
        fd = os.open(name, _READ_FLAGS, dir_fd=self.fd)
        try:
            _sync(fd)
        finally:
            os.close(fd)
        self.staged.discard(name)
        self._sync_entry(name)

    def _sync_entry(self, name: str) -> None:
        if name in self.unsynced:
            _sync(self.fd)
            self.unsynced.discard(name)

    def remove(self, name: str, durable: bool = True) -> None:
        self.forget(name)
        if self.unlink(name) and durable:
            _sync(self.fd)

    def require_room(self) -> None:
        """`OSError` ENOSPC unless the folder's file system has a free block and inode (those
        reserved for root count when running as root)."""
        info = os.fstatvfs(self.fd)
        root = os.geteuid() == 0
        blocks = info.f_bfree if root else info.f_bavail
        inodes = info.f_ffree if root else info.f_favail
        if blocks <= 0 or inodes <= 0:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    def forget(self, name: str) -> None:
        """Stop tracking `name` (it is being removed)."""
        self.staged.discard(name)
        self.unsynced.discard(name)
        self.known.discard(name)

    def unlink(self, name: str) -> bool:
        """Remove `name`'s entry; False when there was none. Touches no tracking state, so a
        worker thread may run it while the trio thread appends to other files."""
        try:
            os.unlink(name, dir_fd=self.fd)
        except FileNotFoundError:
            return False
        return True


class Appeared(Exception):
    """An execution's file this writer did not know of exists (made by someone else)."""


def _sync(fd: int) -> None:
    try:
        os.fsync(fd)
    except OSError as exc:
        raise DurabilityLost(exc.errno, exc.strerror) from exc


def _cut_back(fd: int, size: int) -> None:
    try:
        os.ftruncate(fd, size)
        os.fsync(fd)
    except OSError as exc:
        raise DurabilityLost(exc.errno, exc.strerror) from exc
