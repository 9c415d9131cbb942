"""A durable write that failed, as a domain error (PROTOCOL.md §10.1 StorageFailed).

Every store in this package writes through `fsio`, which never leaves a file half-written:
an atomic replace keeps the previous file byte for byte, an append is cut back. What a
caller needs to know then is *which* file and *why* — "no space left on device", "read-only
file system", "input/output error" — so `refusing_writes` turns the `OSError` of a write into
`StorageError`, whose `path` is relative to the store's root (the state folder), never an
absolute machine path.

`StorageError` is an `OSError` (same errno), so code that already handles a failed write as
an `OSError` keeps doing so; the daemon's edge (`storage_failed`) maps it, found anywhere in
an exception's chain, to the wire's `StorageFailed` (-32016). A symlink or other unsafe file
in the way (`fsio.UnsafePath`) is a refusal, not a storage failure, and passes unchanged.

A stored file that must be *read* to answer (the prompt history for ``history/search``) and
cannot be — no permission, a symlink or folder in its place, an I/O error — is the same named
condition on the wire (`unreadable`: StorageFailed with the relative path, saying "cannot
read"), never an internal error (PROTOCOL §10.1).
"""

from __future__ import annotations

import errno as errnos
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from protocol.errors import StorageFailed

from . import fsio

__all__ = [
    "StorageError",
    "exhausted",
    "refusal",
    "refused",
    "refusing_writes",
    "relative_path",
    "storage_failed",
    "storage_reason",
    "unreadable",
]


class StorageError(OSError):
    """A durable write to `path` (relative to the state folder) failed for `reason`; nothing
    was half-written. `errno` is the cause's."""

    def __init__(self, path: str, reason: str, code: int | None = None) -> None:
        super().__init__(code if code is not None else errnos.EIO, reason)
        self.path = path
        self.reason = reason

    def __str__(self) -> str:
        return f"cannot write {self.path}: {self.reason}"


def storage_reason(exc: OSError) -> str:
    """The cause in words, lower case: "no space left on device"."""
    if exc.strerror:
        return exc.strerror[:1].lower() + exc.strerror[1:]
    if exc.errno is not None:
        return os.strerror(exc.errno).lower()
    return type(exc).__name__


def relative_path(path: Path, root: Path) -> str:
    """`path` relative to `root` when under it, else its name (never an absolute path)."""
    try:
        return str(Path(path).relative_to(root))
    except ValueError:
        return Path(path).name


@contextmanager
def refusing_writes(path: Path, root: Path) -> Iterator[None]:
    """Run a durable write of `path`; its `OSError` becomes `StorageError` (module doc)."""
    try:
        yield
    except OSError as exc:
        refused = refusal(exc, path, root)
        if refused is exc:
            raise
        raise refused from exc


def refusal(exc: OSError, path: Path, root: Path) -> OSError:
    """What `refusing_writes` raises for `exc`, a failed write of `path`: `exc` itself when it
    already is a `StorageError` or an `fsio.UnsafePath`, else the `StorageError` naming it. For
    a hot path that catches the `OSError` itself rather than entering a context manager."""
    if isinstance(exc, StorageError | fsio.UnsafePath):
        return exc
    return StorageError(relative_path(path, root), storage_reason(exc), exc.errno)


def storage_failed(exc: BaseException, session_id: str | None = None) -> StorageFailed | None:
    """The wire error for `exc` when a `StorageError` is it or in its chain (causes, contexts,
    single-member exception groups); None otherwise."""
    for current in _chain(exc):
        if isinstance(current, StorageFailed):
            return current
        if isinstance(current, StorageError):
            return StorageFailed(current.path, current.reason, session_id)
    return None


#: The system's own limits, never a bug of robotad's: out of file descriptors.
_EXHAUSTED = frozenset({errnos.EMFILE, errnos.ENFILE})


def exhausted(
    exc: BaseException, root: Path, session_id: str | None = None
) -> StorageFailed | None:
    """The wire's StorageFailed when the process or the system ran out of file descriptors
    anywhere in `exc`'s chain: the file it could not open, relative to `root` (the state
    folder; never an absolute path), or "a file" when the error names none; None otherwise."""
    for current in _chain(exc):
        if isinstance(current, OSError) and current.errno in _EXHAUSTED:
            name = current.filename
            named = isinstance(name, str | bytes) and name
            path = relative_path(Path(os.fsdecode(name)), root) if named else ""
            return refused("open", path, storage_reason(current), session_id)
    return None


def unreadable(exc: OSError, path: Path, root: Path) -> StorageFailed:
    """The wire's StorageFailed for the stored file `path` (under `root`, the state folder)
    that could not be read because of `exc`: its relative path and the cause in words."""
    return refused("read", relative_path(path, root), storage_reason(exc))


def refused(verb: str, path: str, reason: str, session_id: str | None = None) -> StorageFailed:
    """StorageFailed for `path` (relative to the state folder; empty when the failure named
    no file) saying "cannot VERB PATH: REASON"."""
    failed = StorageFailed(path, reason, session_id)
    failed.message = f"cannot {verb} {path or 'a file'}: {reason}"
    failed.args = (failed.message,)
    return failed


def _chain(exc: BaseException) -> Iterator[BaseException]:
    """`exc`, then what caused it or was being handled when it was raised, and so on; a
    group of one exception is that exception. Each once."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, BaseExceptionGroup) and len(current.exceptions) == 1:
            current = current.exceptions[0]
            continue
        yield current
        current = current.__cause__ or current.__context__
