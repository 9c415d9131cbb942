"""File-system adapters of the session-log ports: ``logs/<id>.jsonl`` + ``logs/<id>.payloads/``.

`FileLogSink` appends whole lines with ``O_APPEND`` into an owner-only file (folders 0700,
files 0600 whatever the umask, G-155) and creates sidecars exclusively (G-154), refusing a name
that is not the SHA-256 of the content. `FileLogSource` reads the log with ``O_NOFOLLOW`` and
sidecars relative to a payload-folder descriptor opened without following links, so a symlink
planted at the log, the folder or a sidecar is refused (G-157); it checks a sidecar's size
against the reference before reading a byte (G-158/G-160).

Construct them from a validated session id with `log_paths` (G-156).
"""

from __future__ import annotations

import errno
import os
import stat
import threading
from pathlib import Path

from . import fsio
from .failure import refusing_writes
from .ids import validate_session_id
from .sidecars import SidecarError, digest

__all__ = ["FileLogSink", "FileLogSource", "log_paths"]


def log_paths(logs_dir: Path, session_id: str) -> tuple[Path, Path]:
    """(``<logs>/<id>.jsonl``, ``<logs>/<id>.payloads``); `InputRejected` for an unsafe id."""
    safe = validate_session_id(session_id)
    return logs_dir / f"{safe}.jsonl", logs_dir / f"{safe}.payloads"


def _payload_dir_of(log_path: Path) -> Path:
    return log_path.with_name(log_path.name.removesuffix(".jsonl") + ".payloads")


class FileLogSink:
    """Appends to one log file; `durable` fsyncs each line (off by default: call `sync`)."""

    def __init__(self, path: Path, *, durable: bool = False) -> None:
        self._path = Path(path)
        self._payloads = _payload_dir_of(self._path)
        self._durable = durable
        self._lock = threading.Lock()

    @classmethod
    def for_session(cls, logs_dir: Path, session_id: str, *, durable: bool = False) -> FileLogSink:
        return cls(log_paths(logs_dir, session_id)[0], durable=durable)

    def append(self, line: bytes) -> None:
        if b"\n" in line:
            raise ValueError("a log line must not contain a newline")
        with self._lock, refusing_writes(self._path, self._path.parent.parent):
            fsio.ensure_private_dir(self._path.parent)
            fsio.append_line(self._path, line, durable=self._durable)

    def put_payload(self, content: bytes, sha256: str) -> str:
        if digest(content) != sha256:
            raise ValueError("a sidecar's name must be the SHA-256 of its content")
        path = self._payloads / sha256
        with refusing_writes(path, self._path.parent.parent):
            fsio.ensure_private_dir(self._path.parent)
            fsio.ensure_private_dir(self._payloads)
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


class FileLogSource:
    """Reads one log file and its sidecars."""

    def __init__(self, path: Path) -> None:
        self._path = Path(path)
        self._payloads = _payload_dir_of(self._path)

    @classmethod
    def for_session(cls, logs_dir: Path, session_id: str) -> FileLogSource:
        return cls(log_paths(logs_dir, session_id)[0])

    def read(self) -> bytes | None:
        return fsio.read_regular(self._path)

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
