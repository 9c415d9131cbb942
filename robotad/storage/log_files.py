"""File-system adapters of the session-log ports: ``logs/<id>.jsonl`` + ``logs/<id>.payloads/``.

`FileLogSink` appends whole lines with ``O_APPEND`` into an owner-only file (folders 0700,
files 0600 whatever the umask, G-155), through a descriptor it keeps open between lines (a
bounded number of them process-wide: `open_logs`), and creates sidecars exclusively (G-154),
refusing a name that is not the SHA-256 of the content: a sidecar stored is durable, with its
folder's entry when the folder was made for it (`fsio.ensure_durable_dir`). `FileLogSource`
reads the log with ``O_NOFOLLOW`` and sidecars relative to a payload-folder descriptor opened
without following links, so a symlink planted at the log, the folder or a sidecar is refused
(G-157); it checks a sidecar's size against the reference before reading a byte
(G-158/G-160). It reads the log whole (`read`) or in pieces of `LOG_PIECE_BYTES`
(`read_pieces`), with the same refusals.

Construct them from a validated session id with `log_paths` (G-156).

Its size is one concept: one log's files on disk, written and read with the same refusals.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import stat
import threading
from collections import OrderedDict
from collections.abc import Generator
from pathlib import Path

from . import fsio
from .failure import refusal, refusing_writes
from .ids import validate_session_id
from .sidecars import SidecarError, digest

__all__ = [
    "LOG_PIECE_BYTES",
    "OPEN_LOGS_KEPT",
    "FileLogSink",
    "FileLogSource",
    "log_paths",
    "open_logs",
    "sweep_temp_files",
]

log = logging.getLogger("robotad.storage")


def log_paths(logs_dir: Path, session_id: str) -> tuple[Path, Path]:
    """(``<logs>/<id>.jsonl``, ``<logs>/<id>.payloads``); `InputRejected` for an unsafe id."""
    safe = validate_session_id(session_id)
    return logs_dir / f"{safe}.jsonl", logs_dir / f"{safe}.payloads"


def _payload_dir_of(log_path: Path) -> Path:
    return log_path.with_name(log_path.name.removesuffix(".jsonl") + ".payloads")


def sweep_temp_files(logs_dir: Path, before: float) -> int:
    """Remove the temp files of sidecars a killed daemon was writing, in every session's
    ``<id>.payloads`` folder (and any in `logs_dir` itself); how many. Without it they stayed
    until the session was deleted. Only files last changed before `before` (a time as
    `time.time` gives it: this daemon's start) go, so it may run while sessions write their
    own; a symlink in place of a folder is not followed."""
    folders = [logs_dir]
    try:
        with os.scandir(logs_dir) as entries:
            folders += [
                Path(entry.path)
                for entry in entries
                if entry.name.endswith(".payloads") and entry.is_dir(follow_symlinks=False)
            ]
    except FileNotFoundError:
        return 0
    removed = 0
    for folder in folders:
        try:
            with os.scandir(folder) as entries:
                stale = [e.path for e in entries if fsio.is_temp_name(e.name) and _older(e, before)]
        except FileNotFoundError:
            continue
        for path in stale:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)
                removed += 1
    return removed


def _older(entry: os.DirEntry[str], before: float) -> bool:
    try:
        return entry.stat(follow_symlinks=False).st_mtime < before
    except FileNotFoundError:
        return False


#: Log descriptors kept open at once in the process; past it the least recently used closes.
OPEN_LOGS_KEPT = 64

_APPEND_FLAGS = os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK


class _OpenLogs:
    """The sinks holding a descriptor, least recently written first, at most `limit` of them.

    A sink that opens its file joins (`opened`, which closes the least recently used sink's
    descriptor past the limit, skipping one busy writing), a sink that writes moves to the end
    (`used`), one that closes leaves (`closed`). Idle sessions therefore hold no descriptor
    for long, however many are loaded.
    """

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._lock = threading.Lock()
        self._sinks: OrderedDict[int, FileLogSink] = OrderedDict()
        #: The sink `opened` or `used` last (at the end already: `used` need not be called).
        self.latest: FileLogSink | None = None

    def opened(self, sink: FileLogSink) -> None:
        with self._lock:
            self.latest = sink
            self._sinks[id(sink)] = sink
            for key, victim in list(self._sinks.items()):
                if len(self._sinks) <= self.limit:
                    break
                if victim is not sink and victim._release_if_idle():
                    del self._sinks[key]

    def used(self, sink: FileLogSink) -> None:
        with self._lock:
            if id(sink) in self._sinks:
                self._sinks.move_to_end(id(sink))
                self.latest = sink

    def closed(self, sink: FileLogSink) -> None:
        with self._lock:
            if self._sinks.get(id(sink)) is sink:
                del self._sinks[id(sink)]
            if self.latest is sink:
                self.latest = None

    def count(self) -> int:
        with self._lock:
            return len(self._sinks)


open_logs = _OpenLogs(OPEN_LOGS_KEPT)


def _cut_unfinished_line(fd: int, size: int, name: str) -> int:
    """Cut away the unfinished last line of the log `fd` (`size` bytes) and say so; its new
    size. Only for a file this sink has just opened: a line not ended there was left by a
    writer that died mid-write (robotad killed while a line over a page long was written). It
    never returned to anyone, and kept, it was a bad line in the middle of the log for good:
    ``session/log`` called the log incomplete even after recovery closed it."""
    keep = fsio.end_of_last_line(fd, size)
    os.ftruncate(fd, keep)
    log.warning(
        "log %s: removed %d bytes of an unfinished last line (robotad stopped while writing it)",
        name,
        size - keep,
    )
    return keep


class FileLogSink:
    """Appends to one log file; `durable` fsyncs each line (off by default: call `sync`).

    The file stays open between lines (`close` releases it; so does `open_logs` when too many
    sinks hold one). Before each line the path is checked (one ``lstat``): a log rotated,
    removed or replaced since it was opened is reopened by name, so a line always lands in
    the file the path names now, as if it had been opened afresh. A line appended by another
    writer (log recovery) is noticed by the file's size: the torn-line check reads the last
    byte only when the file does not end where this sink's last line did. A file this sink
    has just opened that ends in an unfinished line has that line cut away (a dead writer's:
    `_cut_unfinished_line`); one that another writer left unfinished while this sink had the
    file open stays, as one line of its own. `put_payload` and `holds_payload` touch none of
    the sink's own state: a sidecar may be stored on a worker thread while lines are appended.
    """

    def __init__(self, path: Path, *, durable: bool = False, root: Path | None = None) -> None:
        self._path = Path(path)
        self._name = os.fspath(self._path)
        #: What a refusal's path is relative to: the state folder (a log lives in ``logs/``).
        self._root = self._path.parent.parent if root is None else Path(root)
        self._payloads = _payload_dir_of(self._path)
        self._durable = durable
        self._lock = threading.Lock()
        self._fd: int | None = None
        self._identity = (0, 0)
        #: The file's size just after this sink's last line (-1: unknown).
        self._end = -1

    @classmethod
    def for_session(cls, logs_dir: Path, session_id: str, *, durable: bool = False) -> FileLogSink:
        return cls(log_paths(logs_dir, session_id)[0], durable=durable)

    @property
    def is_open(self) -> bool:
        """Whether the sink holds a descriptor of its file now."""
        return self._fd is not None

    def append(self, line: bytes) -> None:
        if b"\n" in line:
            raise ValueError("a log line must not contain a newline")
        with self._lock:
            fd: int | None = None
            size = 0
            try:
                fd, size = self._descriptor()
                data = line + b"\n"
                if size > 0 and size != self._end and os.pread(fd, 1, size - 1) != b"\n":
                    if self._end == -1:
                        size = _cut_unfinished_line(fd, size, self._name)
                    else:
                        data = b"\n" + data  # another writer's torn line stays one line
                fsio.write_all(fd, data)
                if self._durable:
                    os.fsync(fd)
            except BaseException as exc:
                if fd is not None:
                    # Take a torn line back (shrinking needs no space): the log stays whole.
                    with contextlib.suppress(OSError):
                        os.ftruncate(fd, size)
                self._close_locked()
                refused = refusal(exc, self._path, self._root) if isinstance(exc, OSError) else exc
                if refused is exc:
                    raise
                raise refused from exc
            self._end = size + len(data)
        if open_logs.latest is not self:
            open_logs.used(self)

    def _descriptor(self) -> tuple[int, int]:
        """The open descriptor of the file the path names now, and that file's size."""
        if self._fd is not None:
            try:
                info = os.lstat(self._name)
            except FileNotFoundError:
                info = None
            if info is not None and (info.st_ino, info.st_dev) == self._identity:
                _own_mode(self._fd, info)
                return self._fd, info.st_size
            self._close_locked()  # rotated, removed or replaced: open what is there now
        # A durable sink's folder is durable before its first line; a session log is not
        # synced, and makes its folder on the event loop, so it syncs nothing there.
        if self._durable:
            fsio.ensure_durable_dir(self._path.parent)
        else:
            fsio.ensure_private_dir(self._path.parent)
        fd = os.open(self._name, _APPEND_FLAGS, fsio.FILE_MODE)
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):
                raise fsio.UnsafePath(
                    errno.EINVAL, "an append-only file's path is not a regular file"
                )
            _own_mode(fd, info)
        except BaseException:
            os.close(fd)
            raise
        self._fd, self._identity, self._end = fd, (info.st_ino, info.st_dev), -1
        open_logs.opened(self)
        return fd, info.st_size

    def holds_payload(self, name: str, size: int) -> bool:
        """Whether a regular file of `size` bytes is the sidecar `name` (one ``lstat``)."""
        return _stored_already(self._payloads / name, size)

    def put_payload(self, content: bytes, sha256: str) -> str:
        if digest(content) != sha256:
            raise ValueError("a sidecar's name must be the SHA-256 of its content")
        path = self._payloads / sha256
        if _stored_already(path, len(content)):
            return sha256  # named by its content: a file of that name and size holds it
        with refusing_writes(path, self._root):
            # A folder made here is durable before the sidecar is in it: a line naming the
            # sidecar never outlives its folder (a power cut right after the store).
            fsio.ensure_durable_dir(self._path.parent)
            fsio.ensure_durable_dir(self._payloads)
            fsio.create_exclusive(path, content)
        return sha256

    def sync(self) -> None:
        """Make every appended line durable."""
        fd = fsio.open_regular(self._path)
        if fd is None:
            return
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def close(self) -> None:
        """Release the file's descriptor (a later `append` opens it again). Idempotent."""
        with self._lock:
            self._close_locked()

    def _release_if_idle(self) -> bool:
        """Close the descriptor unless a line is being written now; True when closed."""
        if not self._lock.acquire(blocking=False):
            return False
        try:
            fd, self._fd, self._end = self._fd, None, -1
            if fd is not None:
                os.close(fd)
            return True
        finally:
            self._lock.release()

    def _close_locked(self) -> None:
        fd, self._fd, self._end = self._fd, None, -1
        if fd is not None:
            os.close(fd)
            open_logs.closed(self)


def _stored_already(path: Path, size: int) -> bool:
    """Whether a regular file of `size` bytes is at `path` (a symlink is not one)."""
    try:
        info = os.lstat(path)
    except OSError:
        return False
    return stat.S_ISREG(info.st_mode) and info.st_size == size


def _own_mode(fd: int, info: os.stat_result) -> None:
    """Keep an owner-only file owner-only (0600) whatever changed its mode (G-155)."""
    if stat.S_IMODE(info.st_mode) != fsio.FILE_MODE and info.st_uid == os.geteuid():
        os.fchmod(fd, fsio.FILE_MODE)


#: How much of a log `FileLogSource.read_pieces` reads at once.
LOG_PIECE_BYTES = 1 << 20


class FileLogSource:
    """Reads one log file and its sidecars (a `session_log.PiecewiseLogSource`)."""

    def __init__(self, path: Path) -> None:
        self._path = Path(path)
        self._payloads = _payload_dir_of(self._path)

    @classmethod
    def for_session(cls, logs_dir: Path, session_id: str) -> FileLogSource:
        return cls(log_paths(logs_dir, session_id)[0])

    def read(self) -> bytes | None:
        return fsio.read_regular(self._path)

    def read_pieces(self) -> Generator[bytes, None, None]:
        """The log in pieces of at most `LOG_PIECE_BYTES`, up to its end as the reads find
        it (as `read` reads it); nothing when it is missing. The file is opened at the first
        piece, with `read`'s refusals (a symlink, anything but a regular file: `UnsafePath`),
        and closed at the end or when the generator is closed."""
        fd = fsio.open_regular(self._path)
        if fd is None:
            return
        try:
            while piece := os.read(fd, LOG_PIECE_BYTES):
                yield piece
        finally:
            os.close(fd)

    def read_payload(self, name: str, expected_bytes: int) -> bytes:
        try:
            folder = os.open(
                self._payloads, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
            )
        except FileNotFoundError:
            raise SidecarError("missing", "a referenced sidecar does not exist") from None
        except OSError as exc:
            raise _refusal(exc, "the sidecar folder") from None
        try:
            return _read_exact(folder, name, expected_bytes)
        finally:
            os.close(folder)


def _read_exact(folder: int, name: str, expected: int) -> bytes:
    try:
        fd = os.open(
            name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=folder
        )
    except FileNotFoundError:
        raise SidecarError("missing", "a referenced sidecar does not exist") from None
    except OSError as exc:
        raise _refusal(exc, "a sidecar") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise SidecarError("unreadable", "a sidecar is not a regular file")
        if info.st_size != expected:
            raise SidecarError("length", "a sidecar's length does not match its reference")
        chunks: list[bytes] = []
        remaining = expected
        while remaining > 0:
            chunk = os.read(fd, remaining)
            if not chunk:
                break
            chunks.append(chunk)
            remaining -= len(chunk)
        if remaining or os.read(fd, 1):
            raise SidecarError("length", "a sidecar's length does not match its reference")
        return b"".join(chunks)
    finally:
        os.close(fd)


def _refusal(exc: OSError, what: str) -> SidecarError:
    if exc.errno in (errno.ELOOP, errno.ENOTDIR):
        return SidecarError("symlink", f"{what} is a symbolic link or not a folder")
    return SidecarError(
        "unreadable", f"{what} cannot be read ({errno.errorcode.get(exc.errno or 0, 'error')})"
    )
