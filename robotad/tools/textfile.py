"""Text-file access shared by the file tools (Read, Edit, Grep, Write).

What counts as text: a regular file whose first `SNIFF_BYTES` hold no NUL byte and decode as
UTF-8. Past that sniff, readers decode with replacement (one stray byte deep in a large log does
not make it unreadable), while Edit round-trips undecodable bytes unchanged (surrogateescape).
UTF-16 and other NUL-bearing encodings therefore count as binary.

Everything here is blocking; the tools call it from a worker thread. Nothing here raises for an
ordinary refusal other than `FileRefused` (with a message naming the path) and `OSError`
(described for the model by `describe_os_error`).
"""

from __future__ import annotations

import codecs
import errno
import os
import stat
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO, TextIO

from robotad.storage import fsio

__all__ = [
    "SNIFF_BYTES",
    "FileRefused",
    "binary_reason",
    "describe_os_error",
    "moved_since_check",
    "open_regular_file",
    "opened_real_path",
    "read_line",
    "walkable_path",
    "write_atomically",
]

SNIFF_BYTES = 8192
"""How much of a file's start decides whether it is text."""

_SKIP_CHUNK_CHARS = 65536
"""Read size while discarding the rest of an over-long line."""


class FileRefused(Exception):
    """A path the file tools will not read or replace; the message says why and names it."""


def open_regular_file(path: str) -> BinaryIO:
    """Open `path` for binary reading, refusing anything but a regular file.

    The open never blocks (a FIFO or a device opens non-blocking and is then refused); the
    check is made on the opened descriptor, so a path swapped after a check cannot slip
    through. The caller closes the returned file. Raises `FileRefused` or `OSError`.
    """
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    try:
        mode = os.fstat(fd).st_mode
        if stat.S_ISDIR(mode):
            raise FileRefused(f"{path} is a directory, not a file")
        if not stat.S_ISREG(mode):
            raise FileRefused(f"{path} is not a regular file (device, FIFO or socket)")
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def opened_real_path(fd: int, opened_as: str) -> str:
    """The real path of the file or folder open at `fd` (opened by the name `opened_as`): as
    the kernel names the descriptor (``/proc/self/fd``), every link resolved as they were
    when it was opened, whatever the path says now. Where there is no ``/proc`` (macOS, a
    container without it): `opened_as` resolved now, if that is the very file open at `fd`
    (same device and inode) — a narrower check, as a name can still change between the two
    looks. Raises `OSError` when it cannot be told."""
    try:
        return os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        if os.path.isdir("/proc/self/fd"):
            raise
    resolved = os.path.realpath(opened_as)
    opened, named = os.fstat(fd), os.stat(resolved)
    if (opened.st_dev, opened.st_ino) != (named.st_dev, named.st_ino):
        raise OSError(errno.ESTALE, "the file open is not the one its name leads to now")
    return resolved


def walkable_path(fd: int, real_path: str) -> str:
    """A path that walks the folder open at `fd` (whose real path is `real_path`): the
    descriptor itself where ``/proc`` names it, else `real_path`."""
    pinned = f"/proc/self/fd/{fd}"
    return pinned if os.path.isdir(pinned) else real_path


def moved_since_check(fd: int, path: str, real_path: str | None) -> str | None:
    """Why what is open at `fd` (opened by `path`) is not what a permission check judged at
    `real_path`, or None when it is (or nothing was judged: `real_path` None).

    The check resolved `path`'s links when it admitted the call; a command running meanwhile
    can turn a name on the path into a link to a protected file before the open. Comparing
    the opened descriptor's own real path, rather than resolving `path` again, leaves no
    window between this check and the bytes read."""
    if real_path is None:
        return None
    try:
        opened = opened_real_path(fd, path)
    except OSError as exc:
        return f"{path}: which file was opened cannot be told ({exc.strerror}); not read"
    if opened == real_path:
        return None
    return (
        f"{path} changed after its permission check: a link on it now leads to another "
        "file than the one checked; not read"
    )


def binary_reason(head: bytes, *, complete: bool) -> str | None:
    """Why `head` is not UTF-8 text, or None when it is.

    `head` is a file's first bytes; `complete` says it is the whole file, otherwise a multibyte
    character cut at its end is not held against it.
    """
    if b"\0" in head:
        return "it looks binary (contains NUL bytes)"
    try:
        codecs.getincrementaldecoder("utf-8")().decode(head, final=complete)
    except UnicodeDecodeError:
        return "it is not UTF-8 text (binary, or another encoding)"
    return None


def read_line(
    stream: TextIO, max_chars: int, check: Callable[[], object] | None = None
) -> tuple[str, int] | None:
    """The next line without its newline, keeping at most `max_chars` characters.

    Returns ``(text, dropped)`` where `dropped` counts the characters cut off the end, or None
    at end of file. Memory stays bounded by `max_chars` whatever the line's length; skipping
    the rest of a long line (gigabytes take seconds) calls `check` between chunks, so a caller
    can stop it (`trio.from_thread.check_cancelled`)."""
    chunk = stream.readline(max_chars + 1)
    if chunk == "":
        return None
    if chunk.endswith("\n"):
        return chunk[:-1], 0
    if len(chunk) <= max_chars:
        return chunk, 0
    dropped = len(chunk) - max_chars
    while more := stream.readline(_SKIP_CHUNK_CHARS):
        if check is not None:
            check()
        if more.endswith("\n"):
            dropped += len(more) - 1
            break
        dropped += len(more)
    return chunk[:max_chars], dropped


def write_atomically(path: str, data: bytes, *, make_parents: bool) -> bool:
    """Replace `path` with `data` so a reader sees the old file or the new one, never a mix.

    The bytes go to a temporary file in the same directory, are fsynced, and the temporary is
    renamed over `path`; then the directory is fsynced where it can be (`fsio.atomic_write`,
    whose folder fsync failing does not fail the write). An existing file keeps its permission
    bits; a new one gets the default mode under the process umask. A symlink at `path` is
    written through (its target is replaced and the link stays). With `make_parents`, missing
    parent directories are created. Returns True when the file did not exist before.
    Raises `FileRefused` for a directory, a special file or a read-only file at `path` (the
    rename would replace a read-only file, which an in-place write could not change),
    `OSError` otherwise; on any
    failure the temporary file is removed and `path` is untouched.
    """
    target = os.path.realpath(path) if os.path.islink(path) else path
    parent = os.path.dirname(target) or "."
    if make_parents:
        try:
            os.makedirs(parent, exist_ok=True)
        except FileExistsError as exc:  # a file where a folder must be, not "File exists"
            raise NotADirectoryError(errno.ENOTDIR, os.strerror(errno.ENOTDIR), parent) from exc
    try:
        existing = os.stat(target)
    except FileNotFoundError:
        existing = None
    if existing is not None and stat.S_ISDIR(existing.st_mode):
        raise FileRefused(f"{path} is a directory, not a file")
    if existing is not None and not stat.S_ISREG(existing.st_mode):
        raise FileRefused(f"{path} is not a regular file (device, FIFO or socket)")
    if existing is not None and _read_only(target, existing):
        # The rename would replace it whatever its mode says: refuse as an in-place write would.
        mode = stat.filemode(existing.st_mode)
        raise FileRefused(f"{path} is read-only ({mode}); it was left as it is")

    fsio.atomic_write(
        Path(target),
        data,
        mode=None if existing is None else stat.S_IMODE(existing.st_mode),
        strict_dir_sync=False,
    )
    return existing is None


def _read_only(path: str, info: os.stat_result) -> bool:
    """Whether the file at `path` is one its mode or owner keeps from being written: no write
    bit at all (as editors mark a file read-only, also for root), or none for this user."""
    return not info.st_mode & 0o222 or not os.access(path, os.W_OK)


def describe_os_error(exc: OSError, path: str) -> str:
    """A one-line account of `exc` for the model, naming `path` and the cause."""
    if isinstance(exc, FileNotFoundError):
        return f"{path} does not exist"
    if isinstance(exc, PermissionError):
        return f"permission denied: {path}"
    if isinstance(exc, IsADirectoryError):
        return f"{path} is a directory, not a file"
    if isinstance(exc, NotADirectoryError):
        return f"a parent of {path} is not a directory"
    reason = exc.strerror or type(exc).__name__
    return f"{path}: {reason}"
