"""The tool-result spill store: oversized results on disk, addressed by opaque references.

The store lives in a fresh ``mkdtemp`` folder (mode 0700) under the runtime folder, with the
product-neutral prefix ``tr-`` (G-198/G-199). Each result is written to an exclusively created
0600 file named by one random token, and is addressed by a *different* random token:
``tool-result:<token>`` (G-195). Spilling the same content twice gives two references, and a
reference holds no path, digest or payload byte (G-196). Errors and ``repr`` carry no path,
digest or payload either (G-197): failures are `SpillError` with a generic reason and an errno
name, raised without chaining the original exception (whose text would name the file).

A result reads back in full until it expires (G-200); expired results are purged on every
`put`/`get` and by `purge_expired`, and `close` removes everything (G-201). The store is
synchronous and thread-safe.

A daemon killed before `close` cannot remove its folder; the next one does (`sweep_abandoned`,
at start). Each store holds a `flock` on a file ``.owner`` in its folder for its life, so a
folder whose lock can be taken belongs to nobody alive — whereas another daemon's live store
in the same runtime folder is never touched.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import re
import secrets
import shutil
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

from . import fsio

__all__ = ["REFERENCE_PREFIX", "SpillError", "SpillNotFound", "SpillStore", "sweep_abandoned"]

REFERENCE_PREFIX = "tool-result:"
DIR_PREFIX = "tr-"
DEFAULT_TTL = 24 * 3600.0
_REFERENCE = re.compile(re.escape(REFERENCE_PREFIX) + r"[A-Za-z0-9_-]{32}")


class SpillError(Exception):
    """Spilling or reading a result failed; the message names no path, digest or payload."""


class SpillNotFound(SpillError):
    """The reference is unknown, malformed, expired, or its store was closed."""


@dataclass(slots=True)
class _Spilled:
    file: str
    expires: float


def _errno_name(exc: OSError) -> str:
    return errno.errorcode.get(exc.errno or 0, "error")


class SpillStore:
    """Spilled tool results of one daemon (or session); use as a context manager or `close`."""

    def __init__(
        self,
        runtime_dir: Path,
        *,
        ttl: float = DEFAULT_TTL,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        try:
            fsio.ensure_private_dir(Path(runtime_dir))
            self._dir = Path(tempfile.mkdtemp(prefix=DIR_PREFIX, dir=runtime_dir))
            os.chmod(self._dir, 0o700)
            self._owner = _hold_owner_lock(self._dir)
        except OSError as exc:
            raise SpillError(f"cannot create the spill store ({_errno_name(exc)})") from None
        self._ttl = ttl
        self._clock = clock
        self._entries: dict[str, _Spilled] = {}
        self._lock = threading.Lock()
        self._closed = False

    def __repr__(self) -> str:
        return f"<SpillStore results={len(self._entries)} closed={self._closed}>"

    def __enter__(self) -> SpillStore:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def put(self, text: str) -> str:
        """Store `text`; return its opaque ``tool-result:<token>`` reference."""
        data = text.encode("utf-8")
        with self._lock:
            if self._closed:
                raise SpillError("the spill store is closed")
            self._purge_locked()
            name = secrets.token_urlsafe(24)
            try:
                fd = os.open(
                    self._dir / name,
                    os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                    0o600,
                )
            except OSError as exc:
                raise SpillError(f"cannot store a tool result ({_errno_name(exc)})") from None
            try:
                fsio.exact_mode(fd, 0o600)
                fsio.write_all(fd, data)
            except OSError as exc:
                os.close(fd)
                with contextlib.suppress(OSError):
                    os.unlink(self._dir / name)
                raise SpillError(f"cannot store a tool result ({_errno_name(exc)})") from None
            os.close(fd)
            reference = REFERENCE_PREFIX + secrets.token_urlsafe(24)
            self._entries[reference] = _Spilled(name, self._clock() + self._ttl)
            return reference

    def get(self, reference: str) -> str:
        """The full text of an unexpired result; `SpillNotFound` otherwise."""
        with self._lock:
            self._purge_locked()
            if not _REFERENCE.fullmatch(reference):
                raise SpillNotFound("not a tool-result reference")
            spilled = self._entries.get(reference)
            if spilled is None or self._closed:
                raise SpillNotFound("unknown or expired tool result")
            try:
                data = fsio.read_regular(self._dir / spilled.file)
            except OSError as exc:
                raise SpillError(f"cannot read a tool result ({_errno_name(exc)})") from None
            if data is None:
                raise SpillNotFound("unknown or expired tool result")
            return data.decode("utf-8")

    def purge_expired(self) -> int:
        """Remove every expired result now; return how many were removed."""
        with self._lock:
            return self._purge_locked()

    def _purge_locked(self) -> int:
        now = self._clock()
        expired = [ref for ref, spilled in self._entries.items() if spilled.expires <= now]
        for reference in expired:
            spilled = self._entries.pop(reference)
            with contextlib.suppress(OSError):
                os.unlink(self._dir / spilled.file)
        return len(expired)

    def close(self) -> None:
        """Remove every spilled result and the store's folder. Idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._entries.clear()
            shutil.rmtree(self._dir, ignore_errors=True)
            os.close(self._owner)

    def __len__(self) -> int:
        return len(self._entries)


_OWNER = ".owner"
#: A folder without an owner file younger than this may be a store being made right now.
_UNOWNED_GRACE_S = 60.0


def _hold_owner_lock(folder: Path) -> int:
    """Create ``.owner`` in `folder` and hold an exclusive lock on it; the descriptor."""
    fd = os.open(
        folder / _OWNER, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600
    )
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BaseException:
        os.close(fd)
        raise
    return fd


def sweep_abandoned(runtime_dir: Path) -> int:
    """Remove the spill folders under `runtime_dir` that no living store holds (a killed
    daemon's); return how many. Folders of this user only; never one whose owner lock is
    held, nor one made in the last minute without a lock yet. Errors skip the folder."""
    removed = 0
    try:
        entries = list(os.scandir(runtime_dir))
    except OSError:
        return 0
    for entry in entries:
        try:
            if not entry.name.startswith(DIR_PREFIX) or not entry.is_dir(follow_symlinks=False):
                continue
            if entry.stat(follow_symlinks=False).st_uid != os.getuid():
                continue
            if _abandoned(Path(entry.path), entry.stat(follow_symlinks=False).st_mtime):
                shutil.rmtree(entry.path)
                removed += 1
        except OSError:
            continue
    return removed


def _abandoned(folder: Path, modified: float) -> bool:
    try:
        fd = os.open(folder / _OWNER, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        return time.time() - modified > _UNOWNED_GRACE_S
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    finally:
        os.close(fd)
    return True
