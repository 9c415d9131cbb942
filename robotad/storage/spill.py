"""The tool-result spill store: oversized results on disk, addressed by opaque references.

The store lives in a fresh ``mkdtemp`` folder (mode 0700) under the runtime folder, with the
product-neutral prefix ``tr-`` (G-198/G-199). Each result is written to an exclusively created
0600 file named by one random token, and is addressed by a *different* random token:
``tool-result:<token>`` (G-195). Spilling the same content twice gives two references, and a
reference holds no path, digest or payload byte (G-196). Errors and ``repr`` carry no path,
digest or payload either (G-197): failures are `SpillError` with a generic reason and an errno
name, raised without chaining the original exception (whose text would name the file).

A result reads back in full until it expires (G-200) — 24 hours, or until the daemon stops,
whichever comes first: the store lives in the runtime folder only, so a record, an export and a
restart keep the reference, never the content. The 24 hours count time the machine spent
suspended (``CLOCK_BOOTTIME``; the monotonic clock stops during a suspend, and a laptop's
nights would have stretched them). It reads back only as it was stored: the store keeps each
result's length in memory, so a file cut short, grown, left undecodable or removed behind the
store's back is a `SpillError` saying so, never a part of a result passed off as the whole
(a digest would also catch a rewrite of the same length, by someone with the user's rights,
at the cost of hashing every result on the event loop: 0.2 s for an MCP server's 64 MiB).
Expired results are purged on every `put`/`get` and by `purge_expired`, and `close` removes
everything (G-201). The store is thread-safe, and its lock is held only for bookkeeping, never
across a file's bytes: a result being written or read on a worker thread never keeps the event
loop waiting for the lock (a `share`, `release` or `purge_expired` runs there).

Writing a result never holds the event loop (architecture decision 54): `put`, the one callers
on the loop use, encodes and writes a long result on a worker thread (`handoff.run_blocking`,
as a turn's record save does), and only a result of at most `INLINE_MAX_CHARS` on the loop,
where that costs less than the hand-off. The result's bytes are counted against the budget
before the file is made, the file is created exclusively and written whole before its
reference exists, and a failed write removes the file and gives the bytes back, so no reader
ever meets a half-written result and no reference names a missing one. `put_blocking` is the
same on the calling thread, for worker threads and callers without an event loop.

The results stored at once take at most the store's budget (`budget`, by default
`DEFAULT_BUDGET` or a quarter of the runtime folder's file system, whichever is less): that
file system is memory (a tmpfs) shared with the user's other programs, and a day of large
results (an MCP server's screenshots) must not fill it. A `put` past the budget is a
`SpillError`, as a full disk is: the caller shows the result cut short instead.

One store serves the whole daemon; each session uses it through `scoped` (a view naming the
session). A view's `put` makes the session the result's owner and its `get` reads only results
the session owns, so a reference is never a way into another session's results. `share` makes
a fork an owner of the references its copied history holds; `release` (a deleted session) drops
an owner and removes every result no owner is left for. The unscoped store reads everything.

A daemon killed before `close` cannot remove its folder; the next one does (`sweep_abandoned`,
at start). Each store holds a `flock` on a file ``.owner`` in its folder for its life, so a
folder whose lock can be taken belongs to nobody alive — whereas another daemon's live store
in the same runtime folder is never touched.

Its size is one concept: the store's whole life — its folder, the writing, reading, sharing
and expiry of its results under one budget, and the sweep of a dead store's folder — whose
parts share the lock and the bookkeeping of `_Shelf`.
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
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType

from . import fsio
from .handoff import run_blocking

__all__ = [
    "DEFAULT_BUDGET",
    "INLINE_MAX_CHARS",
    "REFERENCE_PREFIX",
    "SpillError",
    "SpillNotFound",
    "SpillStore",
    "references_in",
    "since_boot",
    "sweep_abandoned",
]

REFERENCE_PREFIX = "tool-result:"
DIR_PREFIX = "tr-"
DEFAULT_TTL = 24 * 3600.0
#: The most bytes of results stored at once, unless a quarter of the file system is less.
DEFAULT_BUDGET = 512 * 1024 * 1024
#: The longest text `put` stores on the event loop (at most 64 KiB of UTF-8). On a tmpfs an
#: exclusive create and write of 16 KiB takes the loop about 8 µs, a hand-off to a worker thread
#: about 16 µs of its own time; past this the write's cost grows with its size, the hand-off's
#: does not.
INLINE_MAX_CHARS = 16 * 1024
#: Characters encoded at a time on the way to the file: an encoding holds the interpreter's
#: lock, so a long result encoded in one piece (64 MiB: ~40 ms) stopped the event loop though
#: it ran on a worker thread; between pieces the loop takes its turn.
_ENCODE_CHARS = 1024 * 1024
_REFERENCE = re.compile(re.escape(REFERENCE_PREFIX) + r"[A-Za-z0-9_-]{32}")


class SpillError(Exception):
    """Spilling or reading a result failed; the message names no path, digest or payload."""


class SpillNotFound(SpillError):
    """The reference is unknown, malformed, expired, or its store was closed."""


@dataclass(slots=True)
class _Spilled:
    file: str
    expires: float
    #: How many bytes were written, to know the file is still whole.
    size: int
    #: The sessions that may read it (empty: only the unscoped store, as `put` there gives).
    owners: set[str] = field(default_factory=set)


class _Shelf:
    """What every view of one store shares: its folder, entries, lock and state."""

    def __init__(
        self,
        folder: Path,
        owner_lock: int,
        ttl: float,
        clock: Callable[[], float],
        budget: int,
    ) -> None:
        self.dir = folder
        self.owner_lock = owner_lock
        self.ttl = ttl
        self.clock = clock
        self.budget = budget
        #: Bytes of the results stored now (what counts against `budget`).
        self.used = 0
        self.entries: dict[str, _Spilled] = {}
        self.lock = threading.Lock()
        self.closed = False


def references_in(text: str) -> list[str]:
    """Every ``tool-result:`` reference `text` holds, in order (a spilled result's whole
    content, or one an MCP result's description names)."""
    return _REFERENCE.findall(text)


def _errno_name(exc: OSError) -> str:
    return errno.errorcode.get(exc.errno or 0, "error")


def since_boot() -> float:
    """Seconds since boot, suspended time included (Linux); the monotonic clock elsewhere."""
    boot = getattr(time, "CLOCK_BOOTTIME", None)
    return time.clock_gettime(boot) if boot is not None else time.monotonic()


def _encoded(text: str) -> list[bytes]:
    """`text` as UTF-8, a piece of `_ENCODE_CHARS` characters at a time; `SpillError` for a
    text UTF-8 cannot hold (a lone surrogate)."""
    try:
        return [
            text[start : start + _ENCODE_CHARS].encode("utf-8")
            for start in range(0, len(text), _ENCODE_CHARS)
        ]
    except UnicodeEncodeError:
        raise SpillError(
            "cannot store a tool result: it holds a lone surrogate, which UTF-8 cannot encode"
        ) from None


def _write_new(path: Path, chunks: list[bytes]) -> None:
    """Create `path` exclusively (0600) and write `chunks` to it whole; on any failure the
    file is removed again and the error propagates."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        fsio.exact_mode(fd, 0o600)
        _write_chunks(fd, chunks)
    except BaseException:
        os.close(fd)
        with contextlib.suppress(OSError):
            os.unlink(path)
        raise
    try:
        os.close(fd)
    except OSError:
        with contextlib.suppress(OSError):
            os.unlink(path)
        raise


def _write_chunks(fd: int, chunks: list[bytes]) -> None:
    """Every byte of `chunks` to `fd`, in order (the tests' seam for a slow or failing disk)."""
    for chunk in chunks:
        fsio.write_all(fd, chunk)


class SpillStore:
    """Spilled tool results of one daemon; use as a context manager or `close`. `scoped`
    gives a session's view of it (see the module doc)."""

    def __init__(
        self,
        runtime_dir: Path,
        *,
        ttl: float = DEFAULT_TTL,
        clock: Callable[[], float] = since_boot,
        budget: int | None = None,
    ) -> None:
        """`budget`: the most bytes of results stored at once (None: the default, see the
        module doc)."""
        try:
            fsio.ensure_private_dir(Path(runtime_dir))
            folder = Path(tempfile.mkdtemp(prefix=DIR_PREFIX, dir=runtime_dir))
            os.chmod(folder, 0o700)
            owner_lock = _hold_owner_lock(folder)
            if budget is None:
                budget = _default_budget(owner_lock)
        except OSError as exc:
            raise SpillError(f"cannot create the spill store ({_errno_name(exc)})") from None
        self._shelf = _Shelf(folder, owner_lock, ttl, clock, budget)
        #: The session this view reads and writes for; None for the store itself.
        self._reader: str | None = None

    def scoped(self, session_id: str) -> SpillStore:
        """The view of session `session_id`: it owns what it puts, reads only what it owns,
        and its `close` does nothing (the store's owner closes the store)."""
        view = object.__new__(SpillStore)
        view._shelf = self._shelf
        view._reader = session_id
        return view

    def __repr__(self) -> str:
        return f"<SpillStore results={len(self._shelf.entries)} closed={self._shelf.closed}>"

    def __enter__(self) -> SpillStore:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    async def put(self, text: str) -> str:
        """Store `text` without holding the event loop; return its opaque
        ``tool-result:<token>`` reference (owned by the view's session).

        A text longer than `INLINE_MAX_CHARS` is stored on a worker thread; a shorter one on
        the loop, without a checkpoint. Cancellation never cuts a write: once started it
        finishes, and its reference is returned (the caller meets the cancellation at its
        next checkpoint; `discard` removes a result it will not hand on); a cancellation
        before it starts stores nothing. Raises `SpillError` (a closed store, the budget, a
        refusal of the disk), and then nothing of the text is left on disk.
        """
        if len(text) <= INLINE_MAX_CHARS:
            return self.put_blocking(text)
        return await run_blocking(self.put_blocking, text)

    def put_blocking(self, text: str) -> str:
        """`put` on the calling thread: for a worker thread, or a caller with no event loop."""
        chunks = _encoded(text)
        size = sum(len(chunk) for chunk in chunks)
        name = self._reserve(size)
        try:
            _write_new(self._shelf.dir / name, chunks)
        except OSError as exc:
            closed = self._unreserve(size)
            if closed:
                raise SpillError("the spill store was closed while a result was written") from None
            raise SpillError(f"cannot store a tool result ({_errno_name(exc)})") from None
        except BaseException:
            self._unreserve(size)
            raise
        return self._register(name, size)

    def _reserve(self, size: int) -> str:
        """Count `size` bytes against the budget for a result about to be written; the name of
        its file (not made yet). `SpillError` when the store is closed or the budget full."""
        shelf = self._shelf
        with shelf.lock:
            if shelf.closed:
                raise SpillError("the spill store is closed")
            self._purge_locked()
            if shelf.used + size > shelf.budget:
                mib = shelf.budget / (1024 * 1024)
                raise SpillError(
                    f"cannot store a tool result: the results stored already take the store's "
                    f"budget of {mib:.4g} MiB"
                )
            shelf.used += size
            return secrets.token_urlsafe(24)

    def _unreserve(self, size: int) -> bool:
        """Give back what `_reserve` counted for a result that was not stored; whether the
        store was closed meanwhile (its count starts again from nothing then)."""
        shelf = self._shelf
        with shelf.lock:
            if not shelf.closed:
                shelf.used -= size
            return shelf.closed

    def _register(self, name: str, size: int) -> str:
        """Make the whole file `name` (its `size` bytes already counted) readable under a new
        reference, and return it; if the store was closed while it was written, remove it."""
        shelf = self._shelf
        with shelf.lock:
            if shelf.closed:
                with contextlib.suppress(OSError):
                    os.unlink(shelf.dir / name)
                with contextlib.suppress(OSError):
                    os.rmdir(shelf.dir)  # the close's rmtree may have missed the new file
                raise SpillError("the spill store was closed while a result was written")
            reference = REFERENCE_PREFIX + secrets.token_urlsafe(24)
            owners = set() if self._reader is None else {self._reader}
            shelf.entries[reference] = _Spilled(name, shelf.clock() + shelf.ttl, size, owners)
            return reference

    def discard(self, reference: str) -> bool:
        """Remove a result this view may read, now (a caller cancelled before it could hand
        the reference on); whether there was one. Its owners lose it too."""
        with self._shelf.lock:
            spilled = self._shelf.entries.get(reference)
            if spilled is None or not self._may_read(spilled):
                return False
            self._remove_locked(reference)
            return True

    def get(self, reference: str) -> str:
        """The full text of an unexpired result this view may read; `SpillNotFound` otherwise
        (another session's result reads as unknown: a reference reveals nothing). The file is
        read outside the store's lock; a result removed meanwhile reads as expired."""
        shelf = self._shelf
        with shelf.lock:
            self._purge_locked()
            if not _REFERENCE.fullmatch(reference):
                raise SpillNotFound("not a tool-result reference")
            spilled = shelf.entries.get(reference)
            if spilled is None or shelf.closed or not self._may_read(spilled):
                raise SpillNotFound("unknown or expired tool result")
        try:
            data = fsio.read_regular(shelf.dir / spilled.file)
        except OSError as exc:
            self._still_stored(reference, spilled)
            raise SpillError(f"cannot read a tool result ({_errno_name(exc)})") from None
        self._still_stored(reference, spilled)
        if data is None:
            raise SpillError("the stored tool result was removed from disk before it was read")
        changed = SpillError(
            "the stored tool result was changed on disk after it was stored, so it is not shown"
        )
        if len(data) != spilled.size:
            raise changed
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError:
            raise changed from None

    def _still_stored(self, reference: str, spilled: _Spilled) -> None:
        """`SpillNotFound` unless `reference` still names `spilled` (it did not expire, was not
        released or discarded, and the store is open)."""
        with self._shelf.lock:
            if self._shelf.entries.get(reference) is not spilled or self._shelf.closed:
                raise SpillNotFound("unknown or expired tool result")

    def share(self, references: Iterable[str], owner: str, with_owner: str) -> int:
        """Make `with_owner` an owner of each of `references` that `owner` owns (a fork
        reaching the results its copied history names); return how many."""
        shared = 0
        with self._shelf.lock:
            for reference in references:
                spilled = self._shelf.entries.get(reference)
                if spilled is not None and owner in spilled.owners:
                    spilled.owners.add(with_owner)
                    shared += 1
        return shared

    def release(self, owner: str) -> int:
        """`owner` reads nothing any more (its session was deleted); every result left with
        no owner is removed. Return how many were removed."""
        with self._shelf.lock:
            orphaned = []
            for reference, spilled in self._shelf.entries.items():
                if owner in spilled.owners:
                    spilled.owners.discard(owner)
                    if not spilled.owners:
                        orphaned.append(reference)
            for reference in orphaned:
                self._remove_locked(reference)
            return len(orphaned)

    def purge_expired(self) -> int:
        """Remove every expired result now; return how many were removed."""
        with self._shelf.lock:
            return self._purge_locked()

    def _may_read(self, spilled: _Spilled) -> bool:
        return self._reader is None or self._reader in spilled.owners

    def _purge_locked(self) -> int:
        now = self._shelf.clock()
        expired = [ref for ref, spilled in self._shelf.entries.items() if spilled.expires <= now]
        for reference in expired:
            self._remove_locked(reference)
        return len(expired)

    def _remove_locked(self, reference: str) -> None:
        spilled = self._shelf.entries.pop(reference)
        self._shelf.used -= spilled.size
        with contextlib.suppress(OSError):
            os.unlink(self._shelf.dir / spilled.file)

    def close(self) -> None:
        """Remove every spilled result and the store's folder. Idempotent; a session's view
        (`scoped`) closes nothing."""
        shelf = self._shelf
        if self._reader is not None:
            return
        with shelf.lock:
            if shelf.closed:
                return
            shelf.closed = True
            shelf.entries.clear()
            shelf.used = 0
            shutil.rmtree(shelf.dir, ignore_errors=True)
            os.close(shelf.owner_lock)

    def __len__(self) -> int:
        return len(self._shelf.entries)


_OWNER = ".owner"
#: A folder without an owner file younger than this may be a store being made right now.
_UNOWNED_GRACE_S = 60.0


def _default_budget(fd: int) -> int:
    """`DEFAULT_BUDGET`, or a quarter of the file system holding `fd` when that is less (a
    file system that reports no size gets the default)."""
    info = os.fstatvfs(fd)
    size = info.f_blocks * info.f_frsize
    return min(DEFAULT_BUDGET, size // 4) if size else DEFAULT_BUDGET


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
