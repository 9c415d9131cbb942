"""Journals for tests of the layers above the journal: in memory, and with injected faults.

The Session's and the storage tests use them; the daemon never does.

- `MemoryJournal` keeps records in a dict with exactly the port semantics of
  `FileExecutionJournal`: idempotent by id (`timestamp` ignored), `JournalConflict` for a
  different record under a used id, `[]` for an unknown execution.
- `FaultyJournal(inner, fail_on=..., after=..., tear=..., fail_reads=...)` wraps any journal:

  * `fail_on(record)` true → the append raises `JournalWriteError`; with ``after=False`` (the
    default) before the inner append, so nothing is stored; with ``after=True`` after it, so the
    record *is* stored although the caller was told it failed (what a crash or a lost fsync
    reply looks like to a caller).
  * `tear(record)` true → a crash in the middle of writing that record: the append raises
    `JournalWriteError`, nothing is stored, and until `reopen()` every `read` or `append` of
    that execution raises `JournalCorrupt` naming the torn final line — what a reader that did
    not repair would see. `reopen()` drops the torn tail, as `FileExecutionJournal.open` does.
  * `fail_reads(execution_id)` true → `read` raises `JournalReadError`.

  The predicates are plain attributes, so a test can arm or disarm them mid-run; `once(p)`
  makes a predicate fire a single time and `of_kind("reply", ...)` matches records by kind.
  `attempts` lists every record passed to `append` (`staged` those passed with
  ``durable=False``), `failures` counts injected failures.
"""

from __future__ import annotations

from collections.abc import Callable

import msgspec

from robotad.storage.journal import (
    ExecutionJournal,
    JournalConflict,
    JournalCorrupt,
    JournalReadError,
    JournalRecord,
    JournalWriteError,
    record_fingerprint,
    validate_execution_id,
)

__all__ = ["FaultyJournal", "MemoryJournal", "RecordPredicate", "of_kind", "once"]

RecordPredicate = Callable[[JournalRecord], bool]


def _never(_record: JournalRecord) -> bool:
    return False


def of_kind(*kinds: str) -> RecordPredicate:
    """Matches records whose `kind` tag is one of `kinds` (``"reply"``, ``"request"``, …)."""
    wanted = frozenset(kinds)

    def matches(record: JournalRecord) -> bool:
        return type(record).__struct_config__.tag in wanted

    return matches


def once(predicate: RecordPredicate) -> RecordPredicate:
    """`predicate`, but true for the first matching record only (a transient fault)."""
    fired = False

    def matches(record: JournalRecord) -> bool:
        nonlocal fired
        if fired or not predicate(record):
            return False
        fired = True
        return True

    return matches


def _copy(record: JournalRecord) -> JournalRecord:
    """A deep copy, so callers never share mutable members (messages) with the store."""
    copied: JournalRecord = msgspec.json.decode(msgspec.json.encode(record), type=JournalRecord)
    return copied


class MemoryJournal:
    """`ExecutionJournal` in memory: durable for the life of the object, nothing else."""

    def __init__(self) -> None:
        self._records: dict[str, list[JournalRecord]] = {}

    async def append(self, record: JournalRecord, *, durable: bool = True) -> None:
        """Store a copy of `record` (staged or not: memory is as durable as it gets)."""
        del durable
        execution_id = validate_execution_id(record.execution_id)
        records = self._records.setdefault(execution_id, [])
        for stored in records:
            if stored.id == record.id:
                if record_fingerprint(stored) == record_fingerprint(record):
                    return
                raise JournalConflict(execution_id, record.id)
        records.append(_copy(record))
        self._records[execution_id] = self._records.pop(execution_id)  # most recently written

    async def read(self, execution_id: str) -> list[JournalRecord]:
        validate_execution_id(execution_id)
        return [_copy(record) for record in self._records.get(execution_id, [])]

    async def executions(self) -> list[str]:
        """Least recently written first."""
        return [eid for eid, records in self._records.items() if records]

    async def discard(self, execution_id: str, *, durable: bool = True) -> None:
        del durable
        validate_execution_id(execution_id)
        self._records.pop(execution_id, None)


class FaultyJournal:
    """Wraps `inner` and injects write failures, torn records and read failures (module doc)."""

    def __init__(
        self,
        inner: ExecutionJournal,
        fail_on: RecordPredicate = _never,
        *,
        after: bool = False,
        tear: RecordPredicate = _never,
        fail_reads: Callable[[str], bool] | None = None,
    ) -> None:
        self.inner = inner
        self.fail_on = fail_on
        self.after = after
        self.tear = tear
        self.fail_reads = fail_reads
        self.attempts: list[JournalRecord] = []
        #: The records appended with ``durable=False`` (staged), in order.
        self.staged: list[JournalRecord] = []
        self.failures = 0
        self._torn: set[str] = set()

    def reopen(self) -> None:
        """Forget torn tails, as reopening a file journal repairs them."""
        self._torn.clear()

    async def _refuse_torn(self, execution_id: str) -> None:
        if execution_id in self._torn:
            line = len(await self.inner.read(execution_id)) + 1
            message = "torn final line: an append that never completed"
            raise JournalCorrupt(execution_id, [{"line": line, "message": message}])

    def _injected(self, what: str, record: JournalRecord) -> JournalWriteError:
        self.failures += 1
        return JournalWriteError(
            f"injected {what} appending record {record.id} of execution {record.execution_id}"
        )

    async def append(self, record: JournalRecord, *, durable: bool = True) -> None:
        self.attempts.append(record)
        if not durable:
            self.staged.append(record)
        await self._refuse_torn(record.execution_id)
        if self.tear(record):
            self._torn.add(record.execution_id)
            raise self._injected("torn write", record)
        if self.fail_on(record):
            if self.after:
                await self.inner.append(record, durable=durable)
            raise self._injected("write failure", record)
        await self.inner.append(record, durable=durable)

    async def read(self, execution_id: str) -> list[JournalRecord]:
        if self.fail_reads is not None and self.fail_reads(execution_id):
            self.failures += 1
            raise JournalReadError(f"injected read failure of execution {execution_id}")
        await self._refuse_torn(execution_id)
        return await self.inner.read(execution_id)

    async def executions(self) -> list[str]:
        """The inner journal's, in its order (least recently written first); a torn
        execution the inner one does not list comes last (its tear was the latest write)."""
        listed = await self.inner.executions()
        return [*listed, *sorted(self._torn - set(listed))]

    async def discard(self, execution_id: str, *, durable: bool = True) -> None:
        await self.inner.discard(execution_id, durable=durable)
        self._torn.discard(execution_id)
