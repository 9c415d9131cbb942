"""The durable execution journal: a JSONL file per recoverable execution (architecture decision 2).

Layout: ``<state>/journal/<sessionId>/<executionId>.jsonl``; folders 0700 and files 0600
whatever the umask. Both ids are checked as safe path segments (`InputRejected`) before any
path is built, and every file is opened through the held folder descriptor with
``O_NOFOLLOW``, so a planted symlink is refused, never followed.

The record types and their line codec live in `journal_records` and are re-exported here.

The port, `ExecutionJournal`:

- `append(record)` returns only once the record is durable: the whole line is written with
  ``O_APPEND`` (one ``write`` unless the kernel writes short), the file fsynced and, when the
  file's folder entry is not durable yet (this append, or an earlier staged one, created the
  file), the folder fsynced.
  It is idempotent by ``record.id`` within its execution: a record equal to the stored one in
  every member but `timestamp` is a no-op (nothing written, nothing synced, the first timestamp
  stays); a different record under a used id raises `JournalConflict` and writes nothing.
- `append(record, durable=False)` stages the record: for an execution that has a file, the line
  is written the same way but not synced; for one that has none yet, it is held in memory.
  Either way it becomes durable with the next durable append to the same execution (which
  writes what is held, creates the file and syncs it and its folder; an fsync covers every
  earlier line of a file); a crash before that may lose it, and nothing else. Only for a
  record no guarantee needs on disk by itself (an execution's ``started`` before its first
  durable record, a plain turn's answer, an end mark nobody will read). So a plain turn,
  staged throughout and discarded once its record is saved, never makes a file: on ext4 a
  file created and unlinked per turn put about 1.5 ms of metadata on the record's fsyncs.
  Held records are read, listed and discarded from memory, and written (staged) at `aclose`
  for a host that keeps its journals, or once `HELD_KEPT` executions are held, the longest
  held first. A new execution is held only while the file system has
  a block and an inode left, as creating its file would need, so a full disk still refuses a
  turn before it begins.
- `read(execution_id)` returns the records in append order (no file: ``[]``); `executions()`
  lists the executions with a file, least recently written first; `discard(execution_id)`
  removes one, durably unless told ``durable=False``.
- A failed append raises `JournalWriteError`: nothing was acknowledged. A partial write is cut
  back off the file; if that or an ``fsync`` fails, the file's durable state is unknown, so the
  journal refuses further writes until it is closed and opened again.

Corruption is reported, never read as "nothing pending": an undecodable line, a final line
without its newline, a record naming another execution, or a record id used twice raises
`JournalCorrupt` with every problem located by line (up to `MAX_ISSUES`); a symlink, FIFO or
folder in place of an execution's file is corruption at line 0. Appending to a corrupt
execution is refused the same way (a link swapped in after the journal knew the file fails the
write instead: `JournalWriteError`).

Torn tails are repaired on `open()`, and only there. An append is acknowledged only after its
newline-terminated line was fsynced, and record JSON never holds a raw newline, so bytes after
the last newline of a file are a write that never returned: `open()` truncates them (and removes
a file left empty) before anything reads. A complete line that does not decode is never
repaired, since it might have been acknowledged.

One writer per session: `open()` takes an exclusive, non-blocking ``flock`` on the session's
journal folder (held elsewhere → `JournalLocked`) and `aclose()` releases it; the lock lives on
the open folder descriptor, so it dies with a crashed process. Within the process a `trio.Lock`
serialises every operation. File work runs in a worker thread that is not abandoned on cancel:
an append that started finishes (durably, or with an error) before a cancellation arrives, so
cancelling never tears a line. A staged append that reads nothing runs inline: one small write
(and, for a new execution, one exclusive create), synced nothing, cheaper than a thread's round
trip. A non-durable discard is not waited for at all: right after an fsync, ext4 takes hundreds
of microseconds to unlink, and the unlink's metadata rides on the next fsync, so a worker
thread unlinks retired files a batch at a time (`removals.RemovalQueue`). The writer knows
which execution files its folder holds (listed when it locks the folder, kept up to date since),
so a new execution's file is created with a single exclusive open and nothing is read for it.

The blocking work on the locked folder (opening relative to its descriptor, appending, syncing,
torn-tail repair) is `journal_folder.JournalFolder`; this module decides what is written when.

Its size is one concept: the journal's file format, its idempotency, staging and holding, and
its corruption reports, which only make sense together.
"""

from __future__ import annotations

import logging
from pathlib import Path
from types import TracebackType
from typing import Any, Protocol, TypedDict

import trio

from protocol.validate import ValidationFailed, decode_json

from . import fsio
from .failure import StorageError, relative_path, storage_reason
from .handoff import run_blocking
from .ids import is_safe_session_id, validate_session_id
from .journal_folder import SUFFIX as _SUFFIX
from .journal_folder import Appeared as _Appeared
from .journal_folder import DurabilityLost as _DurabilityLost
from .journal_folder import FolderLocked
from .journal_folder import JournalFolder as _Folder
from .journal_folder import reason as _reason
from .journal_records import (
    CompactionRecord,
    EffectFinishedRecord,
    EffectStartedRecord,
    FinishedRecord,
    JournalRecord,
    ReplyRecord,
    RequestRecord,
    ResponseRecord,
    StartedRecord,
    encode_journal_record,
    record_fingerprint,
)
from .refusal import InputRejected
from .removals import RemovalQueue

__all__ = [
    "MAX_ISSUES",
    "CompactionRecord",
    "EffectFinishedRecord",
    "EffectStartedRecord",
    "ExecutionJournal",
    "FileExecutionJournal",
    "FinishedRecord",
    "JournalClosed",
    "JournalConflict",
    "JournalCorrupt",
    "JournalError",
    "JournalLocked",
    "JournalReadError",
    "JournalRecord",
    "JournalWriteError",
    "LineIssue",
    "ReplyRecord",
    "RequestRecord",
    "ResponseRecord",
    "StartedRecord",
    "decode_journal",
    "encode_journal_record",
    "record_fingerprint",
    "validate_execution_id",
]

logger = logging.getLogger("robotad.storage")

#: At most this many problems are listed per corrupt file, then one line says how many more.
MAX_ISSUES = 50
#: Executions held in memory at most; past it the longest held is written to its file, staged
#: (a host that keeps its journals never holds its whole history; robotad holds one a turn).
HELD_KEPT = 64

# -- errors ---------------------------------------------------------------------------------


class LineIssue(TypedDict):
    """One located problem of a journal file: 1-based `line`, 0 for the file as a whole."""

    line: int
    message: str


class JournalError(Exception):
    """Base of every journal failure. Messages name ids and errno text, never record content."""


class JournalClosed(JournalError):
    """The journal was used before `open()` or after `aclose()`."""


class JournalLocked(JournalError):
    """Another journal object (in this process or another) holds the session's journal."""

    def __init__(self, session_id: str) -> None:
        self.session_id = session_id
        super().__init__(f"the journal of session {session_id} is held by another writer")


class JournalWriteError(JournalError):
    """A write was not made durable; nothing was acknowledged. The cause is chained."""


class JournalReadError(JournalError):
    """A journal file could not be read (an I/O or permission error). The cause is chained."""


class JournalConflict(JournalError):
    """A different record was appended under an id the execution already uses."""

    def __init__(self, execution_id: str, record_id: str) -> None:
        self.execution_id = execution_id
        self.record_id = record_id
        super().__init__(
            f"record id {record_id} of execution {execution_id} already names a different record"
        )


class JournalCorrupt(JournalError):
    """An execution's journal cannot be trusted; `issues` locates every problem found, and
    `path` names its file relative to the state folder when a `FileExecutionJournal` read it
    (None from the pure `decode_journal`)."""

    def __init__(
        self, execution_id: str, issues: list[LineIssue], *, path: str | None = None
    ) -> None:
        self.execution_id = execution_id
        self.issues = issues
        self.path = path
        first = f": line {issues[0]['line']}: {issues[0]['message']}" if issues else ""
        more = f" (and {len(issues) - 1} more)" if len(issues) > 1 else ""
        super().__init__(f"journal of execution {execution_id} is corrupt{first}{more}")


def validate_execution_id(value: Any, *, path: str = "$.executionId") -> str:
    """`value` when it is one safe path segment (the session-id rule), else `InputRejected`."""
    if is_safe_session_id(value):
        return str(value)
    message = (
        "execution id must be one safe path segment: a letter or digit, then at most 127 "
        "letters, digits, '.', '_' or '-'"
    )
    raise InputRejected([{"path": path, "message": message}])


# -- decoding -------------------------------------------------------------------------------


def decode_journal(execution_id: str, data: bytes) -> list[JournalRecord]:
    """The records of one execution's file content, or `JournalCorrupt` listing every problem.

    Pure: no I/O, no repair. A final line without its newline is reported like any other
    problem; `FileExecutionJournal.open` is what removes a torn tail before reading.
    """
    issues: list[LineIssue] = []
    records: list[JournalRecord] = []
    first_line_of: dict[str, int] = {}
    lines = data.split(b"\n")
    tail = lines.pop()
    for number, raw in enumerate(lines, start=1):
        try:
            record: JournalRecord = decode_json(raw, JournalRecord)
        except ValidationFailed as exc:
            issues.extend(
                {"line": number, "message": f"{issue['path']}: {issue['message']}"}
                for issue in exc.issues
            )
            continue
        if record.execution_id != execution_id:
            issues.append({"line": number, "message": "$.executionId: names another execution"})
        elif record.id in first_line_of:
            used = first_line_of[record.id]
            issues.append({"line": number, "message": f"$.id: already used on line {used}"})
        else:
            first_line_of[record.id] = number
            records.append(record)
    if tail:
        issues.append(
            {"line": len(lines) + 1, "message": "torn final line: an append that never completed"}
        )
    if issues:
        if len(issues) > MAX_ISSUES:
            extra = len(issues) - MAX_ISSUES
            issues = [*issues[:MAX_ISSUES], {"line": 0, "message": f"and {extra} more problems"}]
        raise JournalCorrupt(execution_id, issues)
    return records


# -- the port and its file implementation ---------------------------------------------------


class ExecutionJournal(Protocol):
    """Durable, idempotent storage of recoverable executions' records (see module docstring)."""

    async def append(self, record: JournalRecord, *, durable: bool = True) -> None: ...

    async def read(self, execution_id: str) -> list[JournalRecord]: ...

    async def executions(self) -> list[str]: ...

    async def discard(self, execution_id: str, *, durable: bool = True) -> None: ...


class FileExecutionJournal:
    """The journal of one session under the state folder `root`.

    Construction validates `session_id` and does no I/O. Use ``async with`` (or `open()` and
    `aclose()`): between them this object is the session's only journal writer. The object
    keeps a fingerprint index of each execution it has read or written and that has not
    finished, so idempotence checks read a file at most once per `open()` and the index does
    not grow with the executions a long-lived session has finished.
    """

    def __init__(self, root: Path, session_id: str) -> None:
        self.session_id = validate_session_id(session_id)
        self.directory = Path(root) / "journal" / self.session_id
        self._lock = trio.Lock()
        self._folder: _Folder | None = None
        self._broken = False
        self._index: dict[str, dict[str, bytes]] = {}
        #: Staged records of executions that have no file yet, in append order: (record id,
        #: fingerprint, line). Written by the execution's first durable append, or at close.
        self._held: dict[str, list[tuple[str, bytes, bytes]]] = {}
        self._removals: RemovalQueue | None = None

    def path_for(self, execution_id: str) -> Path:
        """Where an execution's records live (the id is validated first)."""
        return self.directory / f"{validate_execution_id(execution_id)}{_SUFFIX}"

    @property
    def is_open(self) -> bool:
        return self._folder is not None

    async def open(self) -> None:
        """Create the folder, take the session's writer lock, repair torn tails.

        Raises `JournalLocked` when another writer holds it, `JournalError` (cause chained)
        when the folder cannot be made or is not a real folder.
        """
        async with self._lock:
            if self._folder is not None:
                raise JournalError(f"the journal of session {self.session_id} is already open")
            try:
                self._folder = await trio.to_thread.run_sync(_Folder.acquire, self.directory)
            except FolderLocked:
                raise JournalLocked(self.session_id) from None
            except OSError as exc:
                raise JournalError(
                    f"cannot open the journal of session {self.session_id}: {_reason(exc)}"
                ) from exc
            self._broken = False
            self._index.clear()
            self._removals = RemovalQueue(self._folder.unlink)

    async def aclose(self) -> None:
        """Release the writer lock after any operation in flight. Idempotent; never raises."""
        with trio.CancelScope(shield=True):
            async with self._lock:
                held, self._held = self._held, {}
                if self._folder is not None and held:
                    await trio.to_thread.run_sync(self._write_all_held, self._folder, held)
                if self._removals is not None:  # they unlink through the folder's descriptor
                    await self._removals.settled()
                folder, self._folder, self._removals = self._folder, None, None
                self._index.clear()
                if folder is not None:
                    folder.release()

    def _discard_at_once(self, execution_id: str, durable: bool) -> bool:
        """`discard`'s work when it awaits nothing — an execution only ever held, or a file
        left to the removal worker — done; False when the file must be removed durably."""
        folder = self._writable_folder()
        if self._held.pop(execution_id, None) is not None:
            self._index.pop(execution_id, None)
            return True  # only ever held in memory: no file to remove
        if durable or self._removals is None:
            return False
        self._index.pop(execution_id, None)
        folder.forget(f"{execution_id}{_SUFFIX}")
        self._removals.remove_soon(f"{execution_id}{_SUFFIX}")
        return True

    def _write_all_held(
        self, folder: _Folder, held: dict[str, list[tuple[str, bytes, bytes]]]
    ) -> None:
        """Blocking, at close: write what is held into the executions' files, staged (a host
        that keeps its journals finds them there); one that cannot be written is logged."""
        for execution_id, lines in held.items():
            try:
                self._write_held(folder, execution_id, lines, False)
            except (OSError, JournalError) as exc:
                logger.warning("writing the journal of execution %s failed: %s", execution_id, exc)

    async def settled(self) -> None:
        """Return once the non-durable discards asked for so far have unlinked their files."""
        if self._removals is not None:
            await self._removals.settled()

    async def __aenter__(self) -> FileExecutionJournal:
        await self.open()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    def _relative(self, execution_id: str) -> str:
        """An execution's file, relative to the state folder (as errors name it)."""
        path = self.directory / f"{execution_id}{_SUFFIX}"
        return relative_path(path, self.directory.parent.parent)

    def _storage_error(self, execution_id: str, exc: OSError) -> StorageError:
        """`exc` as the storage failure of an execution's file (its cause chained)."""
        failure = StorageError(self._relative(execution_id), storage_reason(exc), exc.errno)
        failure.__cause__ = exc
        return failure

    def _open_folder(self) -> _Folder:
        if self._folder is None:
            raise JournalClosed(f"the journal of session {self.session_id} is not open")
        return self._folder

    def _writable_folder(self) -> _Folder:
        folder = self._open_folder()
        if self._broken:
            reason = "an earlier write could not be made durable; the journal must be reopened"
            path = relative_path(self.directory, self.directory.parent.parent)
            raise JournalWriteError(
                f"an earlier write to the journal of session {self.session_id} could not be "
                "made durable; close and reopen the journal"
            ) from StorageError(path, reason)
        return folder

    def _load(self, folder: _Folder, execution_id: str) -> list[JournalRecord]:
        """Blocking: read and decode one execution's file."""
        try:
            data = folder.read(f"{execution_id}{_SUFFIX}")
        except fsio.UnsafePath as exc:
            issue: LineIssue = {"line": 0, "message": _reason(exc)}
            raise JournalCorrupt(execution_id, [issue], path=self._relative(execution_id)) from None
        except OSError as exc:
            raise JournalReadError(
                f"cannot read the journal of execution {execution_id}: {_reason(exc)}"
            ) from exc
        if data is None:
            return []
        try:
            return decode_journal(execution_id, data)
        except JournalCorrupt as exc:
            exc.path = self._relative(execution_id)
            raise

    def _remember(self, execution_id: str, records: list[JournalRecord]) -> None:
        """Index what was read, unless the execution is over (nothing will be appended) or
        unknown (an id a client made up must not take room)."""
        if not records or any(isinstance(record, FinishedRecord) for record in records):
            self._index.pop(execution_id, None)
        else:
            self._index[execution_id] = {r.id: record_fingerprint(r) for r in records}

    async def append(self, record: JournalRecord, *, durable: bool = True) -> None:
        """Append `record` unless an equal one is stored under its id: durably, or staged
        with ``durable=False`` (module doc). One worker-thread trip (none for a staged record
        onto a file already indexed), reading the execution's file first only when this
        object has not read or written it since `open()` and the file existed then.

        Raises `InputRejected` (unsafe execution id), `JournalConflict`, `JournalCorrupt`,
        `JournalWriteError` or `JournalClosed`.
        """
        execution_id = validate_execution_id(record.execution_id)
        if not record.id:
            raise InputRejected([{"path": "$.id", "message": "record id is empty"}])
        line = encode_journal_record(record)
        fingerprint = record_fingerprint(record)
        entry = (record.id, fingerprint, line)
        await trio.lowlevel.checkpoint_if_cancelled()
        if not durable and not self._lock.locked():
            self._writable_folder()  # the same refusals as under the lock
            if self._holds(execution_id):
                # Memory only, nothing awaited: no other operation can come between, so the
                # lock need not be taken (taking it costs the event loop a round).
                self._hold_or_refuse(execution_id, entry)
                return
        async with self._lock:
            folder = self._writable_folder()
            index = self._index.get(execution_id)
            if execution_id in self._held or (not durable and self._holds(execution_id)):
                await self._append_held(folder, execution_id, entry, durable)
                return
            work = (folder, execution_id, index, record.id, fingerprint, line, durable)
            reads = index is None and f"{execution_id}{_SUFFIX}" in folder.known
            try:
                if durable or reads:
                    index = await run_blocking(self._append_blocking, *work)
                else:  # staged, nothing to read: one small write (and a create), done inline
                    index = self._append_blocking(*work)
            except OSError as exc:
                self._index.pop(execution_id, None)
                self._broken = self._broken or isinstance(exc, _DurabilityLost)
                raise JournalWriteError(
                    f"cannot append to the journal of execution {execution_id}: {_reason(exc)}"
                ) from self._storage_error(execution_id, exc)
            if isinstance(record, FinishedRecord):  # over: no more appends to check
                self._index.pop(execution_id, None)
            else:
                self._index[execution_id] = index

    async def _append_held(
        self,
        folder: _Folder,
        execution_id: str,
        entry: tuple[str, bytes, bytes],
        durable: bool,
    ) -> None:
        """`append` for an execution with no file: a staged record joins the held ones; a
        durable one writes them all, itself last, into the new file and syncs it (module doc).
        The caller holds the lock."""
        if not durable:
            self._hold_or_refuse(execution_id, entry)
            return
        held = self._held.get(execution_id, [])
        lines = held if self._stored(held, execution_id, entry) else [*held, entry]
        try:
            index = await run_blocking(self._write_held, folder, execution_id, lines, True)
        except OSError as exc:
            self._broken = self._broken or isinstance(exc, _DurabilityLost)
            raise JournalWriteError(
                f"cannot append to the journal of execution {execution_id}: {_reason(exc)}"
            ) from self._storage_error(execution_id, exc)
        self._held.pop(execution_id, None)
        self._index[execution_id] = index

    def _holds(self, execution_id: str) -> bool:
        """Whether a staged record of `execution_id` is held in memory: it holds some already,
        or it has no file and nothing indexed (a new execution). The folder must be open."""
        assert self._folder is not None
        return execution_id in self._held or (
            execution_id not in self._index and f"{execution_id}{_SUFFIX}" not in self._folder.known
        )

    def _hold(self, execution_id: str, entry: tuple[str, bytes, bytes]) -> None:
        """Hold a staged record (idempotent by id: `JournalConflict` for another record). A new
        execution is held only while its folder's file system has a block and an inode left,
        as creating its file would need: on a full disk a turn is refused before it begins
        (`OSError` ENOSPC, reported like a failed write), not at its record's save."""
        held = self._held.get(execution_id)
        if held is None:
            assert self._folder is not None
            self._folder.require_room()
            if len(self._held) >= HELD_KEPT:
                self._write_out_oldest()
            held = []
        if not self._stored(held, execution_id, entry):
            self._held[execution_id] = [*held, entry]

    def _write_out_oldest(self) -> None:
        """Blocking: write the longest-held execution to its file, to make room. On failure it
        stays held, whole, and the refusal names its file, the one that could not be written."""
        assert self._folder is not None
        oldest = next(iter(self._held))
        try:
            self._write_held(self._folder, oldest, self._held[oldest], False)
        except OSError as exc:
            raise JournalWriteError(
                f"cannot write out the held journal of execution {oldest} to make room for "
                f"another: {_reason(exc)}"
            ) from self._storage_error(oldest, exc)
        del self._held[oldest]

    def _hold_or_refuse(self, execution_id: str, entry: tuple[str, bytes, bytes]) -> None:
        """`_hold`, its `OSError` raised as the `JournalWriteError` of a failed append."""
        try:
            self._hold(execution_id, entry)
        except OSError as exc:
            raise JournalWriteError(
                f"cannot append to the journal of execution {execution_id}: {_reason(exc)}"
            ) from self._storage_error(execution_id, exc)

    @staticmethod
    def _stored(
        held: list[tuple[str, bytes, bytes]], execution_id: str, entry: tuple[str, bytes, bytes]
    ) -> bool:
        """Whether `entry`'s record is held already; `JournalConflict` when another one is."""
        record_id, fingerprint, _ = entry
        for held_id, held_fingerprint, _ in held:
            if held_id == record_id:
                if held_fingerprint != fingerprint:
                    raise JournalConflict(execution_id, record_id)
                return True
        return False

    def _write_held(
        self,
        folder: _Folder,
        execution_id: str,
        lines: list[tuple[str, bytes, bytes]],
        durable: bool,
    ) -> dict[str, bytes]:
        """Blocking: a held execution's lines into its new file, in one write; its index."""
        name = f"{execution_id}{_SUFFIX}"
        try:
            folder.append(name, b"".join(line for _, _, line in lines), durable=durable)
        except _Appeared:  # another hand made the file: append each line it lacks
            index = self._fingerprints(folder, execution_id)
            for record_id, fingerprint, line in lines:
                index = self._append_blocking(
                    folder, execution_id, index, record_id, fingerprint, line, durable
                )
            return index
        return {record_id: fingerprint for record_id, fingerprint, _ in lines}

    def _append_blocking(
        self,
        folder: _Folder,
        execution_id: str,
        index: dict[str, bytes] | None,
        record_id: str,
        fingerprint: bytes,
        line: bytes,
        durable: bool,
    ) -> dict[str, bytes]:
        """Blocking: the index of the execution (read from its file when not known), after
        appending the line unless the record is already stored. `JournalConflict` and
        `JournalCorrupt` leave the file unchanged; an `OSError` is a failed write."""
        name = f"{execution_id}{_SUFFIX}"
        if index is None:  # nothing to read for a file the folder does not hold
            index = self._fingerprints(folder, execution_id) if name in folder.known else {}
        for _ in range(2):
            stored = index.get(record_id)
            if stored == fingerprint:
                if durable:  # the stored line may have been staged: it must be durable now
                    folder.sync(name)
                return index
            if stored is not None:
                raise JournalConflict(execution_id, record_id)
            try:
                folder.append(name, line, durable=durable)
            except _Appeared:  # another hand made the file: check its records, then append
                index = self._fingerprints(folder, execution_id)
                continue
            index[record_id] = fingerprint
            return index
        raise JournalWriteError(f"the journal of execution {execution_id} keeps changing")

    def _fingerprints(self, folder: _Folder, execution_id: str) -> dict[str, bytes]:
        return {r.id: record_fingerprint(r) for r in self._load(folder, execution_id)}

    async def read(self, execution_id: str) -> list[JournalRecord]:
        """The execution's records in append order; ``[]`` when it has no file.

        Raises `InputRejected`, `JournalCorrupt`, `JournalReadError` or `JournalClosed`.
        """
        validate_execution_id(execution_id)
        async with self._lock:
            folder = self._open_folder()
            held = self._held.get(execution_id)
            if held is not None:
                return decode_journal(execution_id, b"".join(line for _, _, line in held))
            records = await trio.to_thread.run_sync(self._load, folder, execution_id)
            self._remember(execution_id, records)
            return records

    async def executions(self) -> list[str]:
        """Ids of the executions that have records, least recently written first (those held
        in memory, which no file holds yet, last)."""
        async with self._lock:
            folder = self._open_folder()
            try:
                names = await trio.to_thread.run_sync(folder.names_by_age)
            except OSError as exc:
                raise JournalReadError(
                    f"cannot list the journal of session {self.session_id}: {_reason(exc)}"
                ) from exc
            return [name[: -len(_SUFFIX)] for name in names] + list(self._held)

    async def discard(self, execution_id: str, *, durable: bool = True) -> None:
        """Remove an execution's file, durably (folder fsynced); a missing file is a no-op.

        With ``durable=False`` — for a file whose coming back after a crash would do no harm —
        the file is forgotten at once and unlinked by a worker thread nobody waits for
        (`RemovalQueue`); `aclose` waits for such removals before letting the folder go."""
        validate_execution_id(execution_id)
        await trio.lowlevel.checkpoint_if_cancelled()
        if not self._lock.locked() and self._discard_at_once(execution_id, durable):
            return  # nothing awaited: the lock need not be taken (see `append`)
        async with self._lock:
            if self._discard_at_once(execution_id, durable):
                return
            folder = self._writable_folder()
            self._index.pop(execution_id, None)
            try:
                await trio.to_thread.run_sync(folder.remove, f"{execution_id}{_SUFFIX}", durable)
            except OSError as exc:
                self._broken = self._broken or isinstance(exc, _DurabilityLost)
                raise JournalWriteError(
                    f"cannot discard the journal of execution {execution_id}: {_reason(exc)}"
                ) from self._storage_error(execution_id, exc)
