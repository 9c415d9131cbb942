"""Staged journal appends (``durable=False``): written at once onto an execution's file, held in
memory while it has none (a plain turn never makes one), made durable by the next durable
append of the same execution, never acknowledged as durable on their own."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import msgspec
import pytest
import trio

from robotad.storage import journal as journal_module
from robotad.storage import journal_folder as journal_folder_module
from robotad.storage.failure import StorageError
from robotad.storage.journal import FileExecutionJournal, JournalConflict, JournalWriteError

from .journal_samples import SESSION, every_kind, started


def _paths(journal: FileExecutionJournal, execution_id: str, fsyncs: list[str]) -> tuple[str, str]:
    """The file and folder paths fsyncs name; forgets the fsyncs of opening the journal."""
    fsyncs.clear()
    return (
        os.path.realpath(journal.path_for(execution_id)),
        os.path.realpath(journal.directory),
    )


async def test_a_staged_append_is_written_but_synced_nowhere(
    journal: FileExecutionJournal, fsyncs: list[str]
) -> None:
    """A staged record reads back at once, and no fsync happened for it."""
    _paths(journal, "x-1", fsyncs)
    record = started("x-1")
    await journal.append(record, durable=False)
    assert fsyncs == []
    assert await journal.read("x-1") == [record]


async def test_the_next_durable_append_syncs_the_staged_lines_and_the_new_file(
    journal: FileExecutionJournal, fsyncs: list[str]
) -> None:
    """G-075, G-096 (journal part): the first durable append after a staged one that created
    the file syncs the file (covering every earlier line) and then the folder entry; later
    durable appends sync only the file."""
    first, reply, request, *_ = every_kind("x-1")
    file, folder = _paths(journal, "x-1", fsyncs)
    await journal.append(first, durable=False)
    await journal.append(reply)
    assert fsyncs == [file, folder]
    await journal.append(request)
    assert fsyncs == [file, folder, file]
    assert await journal.read("x-1") == [first, reply, request]


async def test_a_durable_redelivery_of_a_staged_record_makes_it_durable(
    journal: FileExecutionJournal, fsyncs: list[str]
) -> None:
    """An equal record appended again durably writes nothing new but is not acknowledged
    before the staged line (and its new file's entry) are synced; once synced, a further
    redelivery is a no-op."""
    record = started("x-1")
    file, folder = _paths(journal, "x-1", fsyncs)
    await journal.append(record, durable=False)
    await journal.append(record)
    assert fsyncs == [file, folder]
    await journal.append(record)
    assert fsyncs == [file, folder]
    assert len(journal.path_for("x-1").read_bytes().splitlines()) == 1


async def test_staging_onto_a_durable_file_syncs_nothing_and_survives_a_reopen(
    state: Path, fsyncs: list[str]
) -> None:
    """A staged record after durable ones costs no fsync; a clean close and reopen reads it."""
    records = every_kind("x-1")
    async with FileExecutionJournal(state, SESSION) as journal:
        for record in records[:-1]:
            await journal.append(record)
        synced = len(fsyncs)
        await journal.append(records[-1], durable=False)
        assert len(fsyncs) == synced
    async with FileExecutionJournal(state, SESSION) as reopened:
        assert await reopened.read("x-1") == records


async def test_a_staged_record_is_still_idempotent_by_id(journal: FileExecutionJournal) -> None:
    """A different record under the id of a staged one is a conflict, exactly as for a durable
    one, and writes nothing."""
    record = started("x-1")
    await journal.append(record, durable=False)
    other = msgspec.structs.replace(record, turn_id="t-other")
    with pytest.raises(JournalConflict):
        await journal.append(other)
    assert await journal.read("x-1") == [record]


async def test_discarding_a_held_execution_touches_nothing(
    journal: FileExecutionJournal, fsyncs: list[str], opened: list[str]
) -> None:
    """An execution only ever staged has no file: discarding it forgets what was held, with no
    file made, removed or synced (a plain turn's journal costs no file-system work at all); a
    record of that id afterwards starts a new file, whose entry is synced."""
    file, folder = _paths(journal, "x-1", fsyncs)
    await journal.append(started("x-1"), durable=False)
    await journal.append(every_kind("x-1")[1], durable=False)
    await journal.discard("x-1")
    await journal.settled()
    assert fsyncs == []
    assert opened.count("x-1.jsonl") == 0
    assert await journal.executions() == []
    assert await journal.read("x-1") == []
    await journal.append(started("x-1"))
    assert fsyncs == [file, folder]


async def test_held_records_are_listed_read_and_written_at_close(
    state: Path, fsyncs: list[str]
) -> None:
    """A host that keeps its journals finds a held execution listed (last: the most recent)
    and readable, and on disk, staged, once the journal closes; closing syncs nothing."""
    first, reply, *_ = every_kind("x-2")
    async with FileExecutionJournal(state, SESSION) as journal:
        await journal.append(started("x-1"))
        await journal.append(first, durable=False)
        await journal.append(reply, durable=False)
        assert await journal.executions() == ["x-1", "x-2"]
        assert await journal.read("x-2") == [first, reply]
        assert not journal.path_for("x-2").exists()
        synced = len(fsyncs)
    assert len(fsyncs) == synced
    async with FileExecutionJournal(state, SESSION) as reopened:
        assert await reopened.read("x-2") == [first, reply]


async def test_holding_and_dropping_a_plain_execution_gives_the_loop_no_round(
    journal: FileExecutionJournal,
) -> None:
    """A held append and the discard of a held execution await nothing, so they take no lock
    and pass no schedule point: a task waiting to run does not get in between (a plain turn
    spends no event-loop round on its journal). Cancellation is still honoured on entry."""
    ran: list[str] = []

    async def other() -> None:
        ran.append("other")

    async with trio.open_nursery() as nursery:
        nursery.start_soon(other)
        await journal.append(started("x-1"), durable=False)
        await journal.append(every_kind("x-1")[1], durable=False)
        await journal.discard("x-1", durable=False)
        assert ran == []
    assert ran == ["other"]
    with trio.CancelScope() as scope:
        scope.cancel()
        await journal.append(started("x-2"), durable=False)
    assert await journal.executions() == []


@pytest.mark.parametrize("full", ["blocks", "inodes"])
async def test_a_new_execution_is_refused_on_a_full_file_system(
    journal: FileExecutionJournal, monkeypatch: pytest.MonkeyPatch, full: str
) -> None:
    """Held in memory, a new execution's first line writes nothing, so the journal asks the
    file system (one ``fstatvfs``) for the block and inode its file would need: on a full disk
    the append fails as a write would, ENOSPC with the file's relative path, and nothing is
    held. An execution already held goes on."""
    await journal.append(started("x-1"), durable=False)
    real = os.fstatvfs

    def exhausted(fd: int) -> os.statvfs_result:
        info = list(real(fd))
        for field in (3, 4) if full == "blocks" else (6, 7):  # f_bfree/f_bavail, f_ffree/f_favail
            info[field] = 0
        return os.statvfs_result(info)

    monkeypatch.setattr(os, "fstatvfs", exhausted)
    with pytest.raises(JournalWriteError) as refused:
        await journal.append(started("x-2"), durable=False)
    cause = refused.value.__cause__
    assert isinstance(cause, StorageError)
    assert cause.errno == errno.ENOSPC
    assert cause.path == f"journal/{SESSION}/x-2.jsonl"
    assert await journal.executions() == ["x-1"]
    await journal.append(every_kind("x-1")[1], durable=False)  # x-1 needs no new file


async def test_past_the_held_bound_the_longest_held_execution_is_written(
    journal: FileExecutionJournal, fsyncs: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A host that keeps its journals does not hold its whole history in memory: past
    `HELD_KEPT` executions the longest held is written to its file, staged (synced nowhere),
    and every execution still reads back whole."""
    monkeypatch.setattr(journal_module, "HELD_KEPT", 2)
    fsyncs.clear()
    records = {execution_id: started(execution_id) for execution_id in ("x-1", "x-2", "x-3")}
    for record in records.values():
        await journal.append(record, durable=False)
    assert journal.path_for("x-1").exists()
    assert not journal.path_for("x-2").exists()
    assert not journal.path_for("x-3").exists()
    assert fsyncs == []
    for execution_id, record in records.items():
        assert await journal.read(execution_id) == [record]
    assert sorted(await journal.executions()) == ["x-1", "x-2", "x-3"]


async def test_a_failed_write_out_past_the_held_bound_names_the_file_it_failed_on(
    journal: FileExecutionJournal, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Writing the longest-held execution out to make room fails: the new append is refused
    with the path of the file that could not be written (not the new execution's), and the
    longest-held execution stays held, whole; once writes work again both go through."""
    monkeypatch.setattr(journal_module, "HELD_KEPT", 2)
    records = {execution_id: started(execution_id) for execution_id in ("x-1", "x-2", "x-3")}
    await journal.append(records["x-1"], durable=False)
    await journal.append(records["x-2"], durable=False)
    real_append = journal_folder_module.JournalFolder.append

    def failing(folder: object, name: str, data: bytes, *, durable: bool) -> None:
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(journal_folder_module.JournalFolder, "append", failing)
    with pytest.raises(JournalWriteError, match="x-1") as refused:
        await journal.append(records["x-3"], durable=False)
    cause = refused.value.__cause__
    assert isinstance(cause, StorageError)
    assert cause.errno == errno.EIO
    assert cause.path == f"journal/{SESSION}/x-1.jsonl"
    monkeypatch.setattr(journal_folder_module.JournalFolder, "append", real_append)
    await journal.append(records["x-3"], durable=False)
    assert journal.path_for("x-1").exists()
    for execution_id, record in records.items():
        assert await journal.read(execution_id) == [record]
