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
"""

from __future__ import annotations

import contextlib
import errno
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

__all__ = ["REFERENCE_PREFIX", "SpillError", "SpillNotFound", "SpillStore"]

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

    def __len__(self) -> int:
        return len(self._entries)
