"""The journal knows which execution files its folder holds (listed when locked, kept up to
date by its one writer): a new execution's file is made with a single open and nothing is read
for it, and a file made behind the writer's back is still read before anything is appended, so
idempotency by record id holds."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import msgspec
import pytest
import trio
import trio.testing

from robotad.storage import journal as journal_module
from robotad.storage.journal import FileExecutionJournal, JournalConflict, encode_journal_record

from .gates import held_back
from .journal_samples import every_kind, started


async def test_a_new_executions_staged_record_waits_for_its_first_durable_one(
    journal: FileExecutionJournal, opened: list[str]
) -> None:
    """A staged record of an execution with no file opens nothing; the first durable append
    makes the file with one open, the held line and its own in it."""
    first, reply, *_ = every_kind("x-1")
    await journal.append(first, durable=False)
    assert opened.count("x-1.jsonl") == 0
    await journal.append(reply)
    assert opened.count("x-1.jsonl") == 1
    assert journal.path_for("x-1").read_bytes() == (
        encode_journal_record(first) + encode_journal_record(reply)
    )
    assert await journal.read("x-1") == [first, reply]


async def test_a_file_made_behind_the_writers_back_is_read_before_appending(
    journal: FileExecutionJournal,
) -> None:
    record = started("x-1")
    path: Path = journal.path_for("x-1")
    path.write_bytes(encode_journal_record(record))
    other = msgspec.structs.replace(record, turn_id="t-other")
    with pytest.raises(JournalConflict):
        await journal.append(other)
    await journal.append(record)  # the same record: already stored, nothing written
    assert path.read_bytes() == encode_journal_record(record)


async def test_a_file_removed_behind_the_writers_back_is_made_again(
    journal: FileExecutionJournal,
) -> None:
    first, reply, request, *_ = every_kind("x-1")
    await journal.append(first)
    journal.path_for("x-1").unlink()
    await journal.append(reply)
    await journal.append(request)
    assert await journal.read("x-1") == [reply, request]


async def test_only_durable_work_waits_for_a_worker_thread(
    journal: FileExecutionJournal, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A staged append that reads nothing runs inline (held in memory while the execution has
    no file, written at once onto one that has); an fsync goes to a worker thread the caller
    waits for; a non-durable discard is not waited for at all (a worker thread unlinks while
    the caller goes on, and closing waits for it)."""
    trips: list[str] = []

    def spying(real: Any) -> Any:
        async def spy(function: Any, *args: Any, **kwargs: Any) -> Any:
            trips.append(getattr(function, "__name__", repr(function)))
            return await real(function, *args, **kwargs)

        return spy

    monkeypatch.setattr(journal_module.trio.to_thread, "run_sync", spying(trio.to_thread.run_sync))
    monkeypatch.setattr(journal_module, "run_blocking", spying(journal_module.run_blocking))
    first, reply, request, *_ = every_kind("x-1")
    await journal.append(first, durable=False)
    assert trips == []
    assert not journal.path_for("x-1").exists()  # held until a durable record comes
    await journal.append(reply)
    assert len(trips) == 1  # the file made and synced
    await journal.append(request, durable=False)
    assert len(trips) == 1  # written inline onto the file
    assert await journal.read("x-1") == [first, reply, request]
    assert len(trips) == 2  # a read of a file goes to a thread too
    await journal.discard("x-1", durable=False)
    assert len(trips) == 2
    await journal.aclose()
    assert not journal.path_for("x-1").exists()


async def test_closing_waits_for_a_removal_still_running(
    journal: FileExecutionJournal, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The removal unlinks through the folder's descriptor: `aclose` must not release that
    descriptor (which the process may then reuse) while a removal still runs."""
    gate = threading.Event()
    real = journal_module._Folder.unlink

    def slow_unlink(folder: Any, name: str) -> bool:
        gate.wait(10)
        return real(folder, name)

    monkeypatch.setattr(journal_module._Folder, "unlink", slow_unlink)
    await journal.aclose()
    await journal.open()  # its removals now go through the slow unlink
    await journal.append(started("x-1"))
    await journal.discard("x-1", durable=False)

    def still_open() -> None:
        assert journal.is_open

    await held_back(gate, journal.aclose, still_open)
    assert not journal.path_for("x-1").exists()
