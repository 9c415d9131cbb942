"""The file journal's write path: durability, idempotence, safety of paths, locking, failures."""

from __future__ import annotations

import contextlib
import errno
import os
import signal
import stat
import threading
from collections.abc import Iterator
from pathlib import Path

import msgspec
import pytest
import trio

from robotad.storage.journal import (
    FileExecutionJournal,
    FinishedRecord,
    JournalClosed,
    JournalConflict,
    JournalCorrupt,
    JournalError,
    JournalLocked,
    JournalWriteError,
    RequestRecord,
    encode_journal_record,
)
from robotad.storage.refusal import InputRejected

from .journal_samples import SESSION, bulky, every_kind, request, response, started


@contextlib.contextmanager
def umask(mask: int) -> Iterator[None]:
    previous = os.umask(mask)
    try:
        yield
    finally:
        os.umask(previous)


def tree(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*")) if root.exists() else []


async def test_every_kind_round_trips_in_order(journal: FileExecutionJournal) -> None:
    """G-075, G-096 (journal part): what append acknowledged reads back, in order, equal."""
    records = every_kind("x-1")
    for record in records:
        await journal.append(record)
    assert await journal.read("x-1") == records
    lines = journal.path_for("x-1").read_bytes().splitlines()
    assert [msgspec.json.decode(line)["kind"] for line in lines] == [
        "started",
        "reply",
        "request",
        "response",
        "effect_started",
        "effect_finished",
        "compaction",
        "finished",
    ]
    assert b'"executionId":"x-1"' in lines[0]
    assert b'"userMessageId":"m-user"' in lines[0]


async def test_sensitive_values_are_kept_verbatim(journal: FileExecutionJournal) -> None:
    """G-036 (journal part): the journal is the full-fidelity path; it scrubs nothing."""
    record = msgspec.structs.replace(
        request("x-1", "r-1"), arguments={"apiKey": "sk-live-abc123", "password": "hunter2"}
    )
    await journal.append(record)
    assert await journal.read("x-1") == [record]
    assert b"sk-live-abc123" in journal.path_for("x-1").read_bytes()


async def test_first_append_syncs_file_then_folder_later_ones_only_the_file(
    journal: FileExecutionJournal, fsyncs: list[str]
) -> None:
    """G-075 (journal part): the line is on disk when the file is fsynced, a new file's folder
    entry is fsynced after it, and an append returns only after both."""
    file = os.path.realpath(journal.path_for("x-1"))
    folder = os.path.realpath(journal.directory)
    fsyncs.clear()  # opening synced the folders it created (next test)
    first = started("x-1")
    await journal.append(first)
    assert fsyncs == [file, folder]
    second = request("x-1", "r-1")
    await journal.append(second)
    assert fsyncs == [file, folder, file]
    assert Path(file).read_bytes() == encode_journal_record(first) + encode_journal_record(second)


async def test_open_makes_the_folders_it_creates_durable(state: Path, fsyncs: list[str]) -> None:
    """Each folder created on the way to the session's journal folder has its entry synced in
    its parent, so an acknowledged first append cannot vanish with an unsynced folder."""
    async with FileExecutionJournal(state, SESSION):
        pass
    assert fsyncs == [os.path.realpath(p) for p in (state.parent, state, state / "journal")]
    fsyncs.clear()
    async with FileExecutionJournal(state, SESSION):
        pass
    assert fsyncs == []


async def test_identical_reappend_is_a_noop(
    journal: FileExecutionJournal, fsyncs: list[str]
) -> None:
    """G-084 (journal part): redelivering a record under its id writes and syncs nothing; the
    first timestamp stays, and object key order does not matter."""
    original = request("x-1", "r-1")
    await journal.append(original)
    before = journal.path_for("x-1").read_bytes()
    synced = len(fsyncs)
    again = msgspec.structs.replace(
        original,
        timestamp=original.timestamp.replace(year=2001),
        arguments=dict(reversed(list(original.arguments.items()))),
    )
    await journal.append(again)
    assert journal.path_for("x-1").read_bytes() == before
    assert len(fsyncs) == synced
    assert await journal.read("x-1") == [original]


async def test_a_different_record_under_a_used_id_is_a_conflict(
    journal: FileExecutionJournal, state: Path
) -> None:
    """G-085 (journal part): a responseId reused with other content is refused, nothing is
    written, and the refusal survives a reopen (the index is rebuilt from the file)."""
    await journal.append(response("x-1", "r-1", "resp-1", approved=True))
    before = journal.path_for("x-1").read_bytes()
    with pytest.raises(JournalConflict) as caught:
        await journal.append(response("x-1", "r-1", "resp-1", approved=False))
    assert caught.value.record_id == "x-1:response:resp-1"
    assert caught.value.execution_id == "x-1"
    assert journal.path_for("x-1").read_bytes() == before
    await journal.aclose()
    async with FileExecutionJournal(state, SESSION) as reopened:
        with pytest.raises(JournalConflict):
            await reopened.append(response("x-1", "r-1", "resp-1", approved=False))
        await reopened.append(response("x-1", "r-1", "resp-1", approved=True))
        assert journal.path_for("x-1").read_bytes() == before


@pytest.mark.parametrize("mask", [0o000, 0o277])
async def test_folders_are_0700_and_files_0600_whatever_the_umask(state: Path, mask: int) -> None:
    """G-009: journal folders are 0700 and files 0600, set explicitly, whatever the umask."""
    with umask(mask):
        async with FileExecutionJournal(state, SESSION) as journal:
            await journal.append(started("x-1"))
            file_mode = stat.S_IMODE(os.stat(journal.path_for("x-1")).st_mode)
    assert file_mode == 0o600
    for folder in (state, state / "journal", state / "journal" / SESSION):
        assert stat.S_IMODE(os.stat(folder).st_mode) == 0o700, folder


@pytest.mark.parametrize("bad", ["", "../x", ".hidden", "a/b", "x" * 200, "..", "a\x00b"])
async def test_unsafe_session_ids_are_refused_before_any_path(state: Path, bad: str) -> None:
    """G-156 (journal part): refused with -32602 at construction; nothing is created."""
    with pytest.raises(InputRejected) as caught:
        FileExecutionJournal(state, bad)
    assert caught.value.issues[0]["path"] == "$.sessionId"
    assert not state.exists()


@pytest.mark.parametrize("bad", ["../../evil", ".hidden", "a/b", "", "x" * 129])
async def test_unsafe_execution_ids_are_refused_with_nothing_created(
    journal: FileExecutionJournal, state: Path, bad: str
) -> None:
    """Execution ids name files too: the session-id rule applies, checked before any path."""
    before = tree(state)
    with pytest.raises(InputRejected) as caught:
        await journal.append(started(bad))
    assert caught.value.issues == [
        {"path": "$.executionId", "message": caught.value.issues[0]["message"]}
    ]
    for operation in (journal.read, journal.discard):
        with pytest.raises(InputRejected):
            await operation(bad)
    with pytest.raises(InputRejected):
        journal.path_for(bad)
    assert tree(state) == before
    assert not (state.parent / "evil.jsonl").exists()


@pytest.mark.parametrize("dangling", [False, True])
async def test_a_symlink_at_the_journal_file_is_never_followed(
    journal: FileExecutionJournal, tmp_path: Path, dangling: bool
) -> None:
    """A link planted before the first touch makes the execution corrupt (append and read
    refuse it); one swapped in after the journal knew the file fails the write. Never followed."""
    target = tmp_path / "elsewhere.jsonl"
    if not dangling:
        target.write_bytes(b"")
    journal.path_for("x-1").symlink_to(target)
    with pytest.raises(JournalCorrupt) as corrupt:
        await journal.append(started("x-1"))
    assert corrupt.value.issues == [
        {"line": 0, "message": "a symbolic link is in place of a journal file"}
    ]
    with pytest.raises(JournalCorrupt):
        await journal.read("x-1")

    await journal.append(started("x-2"))
    journal.path_for("x-2").unlink()
    journal.path_for("x-2").symlink_to(target)
    with pytest.raises(JournalWriteError) as caught:
        await journal.append(request("x-2", "r-1"))
    assert isinstance(caught.value.__cause__, OSError)
    assert target.exists() is not dangling
    assert dangling or target.read_bytes() == b""


async def test_a_symlink_at_the_session_folder_is_refused(state: Path, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (state / "journal").mkdir(parents=True)
    (state / "journal" / SESSION).symlink_to(elsewhere, target_is_directory=True)
    with pytest.raises(JournalError) as caught:
        await FileExecutionJournal(state, SESSION).open()
    assert not isinstance(caught.value, JournalLocked)
    assert list(elsewhere.iterdir()) == []


async def test_one_writer_per_session(state: Path) -> None:
    """A second journal object for the same session is refused until the first closes."""
    first = FileExecutionJournal(state, SESSION)
    second = FileExecutionJournal(state, SESSION)
    await first.open()
    with pytest.raises(JournalLocked) as caught:
        await second.open()
    assert caught.value.session_id == SESSION
    assert not second.is_open
    async with FileExecutionJournal(state, "other-session"):
        pass  # another session is independent
    await first.aclose()
    await second.open()
    await second.aclose()


def test_the_lock_holds_across_processes_and_dies_with_its_holder(state: Path) -> None:
    """A second process gets JournalLocked; a SIGKILLed holder leaves no stale lock."""
    ready_read, ready_write = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child never returns

        async def hold() -> None:
            await FileExecutionJournal(state, SESSION).open()
            os.write(ready_write, b"!")
            await trio.sleep_forever()

        try:
            trio.run(hold)
        finally:
            os._exit(0)
    os.close(ready_write)
    try:
        assert os.read(ready_read, 1) == b"!"

        async def try_open() -> None:
            with pytest.raises(JournalLocked):
                await FileExecutionJournal(state, SESSION).open()

        trio.run(try_open)
    finally:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        os.close(ready_read)

    async def open_after() -> None:
        async with FileExecutionJournal(state, SESSION) as journal:
            assert await journal.executions() == []

    trio.run(open_after)


async def test_use_outside_open_is_refused(state: Path) -> None:
    journal = FileExecutionJournal(state, SESSION)
    with pytest.raises(JournalClosed):
        await journal.append(started("x-1"))
    with pytest.raises(JournalClosed):
        await journal.append(started("x-1"), durable=False)
    async with journal:
        with pytest.raises(JournalError):
            await journal.open()
    await journal.aclose()  # idempotent
    for call in (journal.read("x-1"), journal.executions(), journal.discard("x-1")):
        with pytest.raises(JournalClosed):
            await call
    assert not state.joinpath("journal", SESSION, "x-1.jsonl").exists()


async def test_executions_and_discard(journal: FileExecutionJournal, fsyncs: list[str]) -> None:
    """G-099 (journal part): discarding removes an execution durably; its ids are free again."""
    await journal.append(started("x-2"))
    await journal.append(started("x-1"))
    (journal.directory / "notes.txt").write_bytes(b"ignored")
    assert sorted(await journal.executions()) == ["x-1", "x-2"]
    fsyncs.clear()
    await journal.discard("x-1")
    assert fsyncs == [os.path.realpath(journal.directory)]
    assert not journal.path_for("x-1").exists()
    assert await journal.read("x-1") == []
    assert await journal.executions() == ["x-2"]
    await journal.discard("x-1")  # already gone: nothing to do
    replacement = msgspec.structs.replace(started("x-1"), turn_id="t-2")
    await journal.append(replacement)
    assert await journal.read("x-1") == [replacement]


async def test_a_discard_that_need_not_be_durable_syncs_nothing(
    journal: FileExecutionJournal, fsyncs: list[str]
) -> None:
    """Retiring a settled execution's journal (``durable=False``) unlinks it without the
    folder fsync an abandon needs: a file a crash brings back is pruned at a later load."""
    await journal.append(started("x-1"))
    fsyncs.clear()
    await journal.discard("x-1", durable=False)
    await journal.settled()  # the unlink is not waited for by `discard`
    assert fsyncs == []
    assert not journal.path_for("x-1").exists()
    assert await journal.executions() == []


async def test_the_index_holds_only_executions_that_may_still_be_appended_to(
    journal: FileExecutionJournal,
) -> None:
    """The fingerprint index does not grow with what a long-lived session has finished, nor
    with ids a client made up: a finished execution and an unknown id are not indexed (their
    idempotence checks read the file again, and still hold)."""
    await journal.append(started("x-open"))
    await journal.append(started("x-done"))
    done = FinishedRecord(id="finished:0", execution_id="x-done", status="completed")
    await journal.append(done)
    assert await journal.read("x-made-up") == []
    assert [r.id for r in await journal.read("x-done")] == ["x-done:started", "finished:0"]
    assert set(journal._index) == {"x-open"}
    await journal.append(done)  # the same record again: a no-op, checked against the file
    assert [r.id for r in await journal.read("x-done")] == ["x-done:started", "finished:0"]


async def test_executions_are_listed_least_recently_written_first(
    journal: FileExecutionJournal,
) -> None:
    """`executions()` orders by each file's last write (what pruning a session's journal
    relies on), whatever the ids' own order."""
    for execution_id in ("x-c", "x-a", "x-b"):
        await journal.append(started(execution_id))
    for age, execution_id in enumerate(("x-b", "x-c", "x-a")):
        stamp = 1_700_000_000 + age
        os.utime(journal.path_for(execution_id), (stamp, stamp))
    assert await journal.executions() == ["x-b", "x-c", "x-a"]


async def test_concurrent_appends_keep_every_line_whole(
    journal: FileExecutionJournal, state: Path
) -> None:
    """Many tasks appending large and small records: every line decodes, nothing is lost, and
    each task's records keep their order."""
    tasks, per_task = 24, 8

    async def writer(task: int) -> None:
        for n in range(per_task):
            size = 150_000 if (task + n) % 5 == 0 else 40
            await journal.append(bulky(f"x-{task % 3}", task * 1000 + n, size))

    with trio.fail_after(60):
        async with trio.open_nursery() as nursery:
            for task in range(tasks):
                nursery.start_soon(writer, task)
    await journal.aclose()
    async with FileExecutionJournal(state, SESSION) as reopened:
        seen: list[int] = []
        for execution in await reopened.executions():
            for record in await reopened.read(execution):
                seen.append(int(record.id.rsplit(":", 1)[1]))
    assert sorted(seen) == sorted(t * 1000 + n for t in range(tasks) for n in range(per_task))
    for task in range(tasks):
        mine = [n for n in seen if n // 1000 == task]
        assert mine == sorted(mine)


def _failing_writes(monkeypatch: pytest.MonkeyPatch, *, after_bytes: int) -> list[int]:
    """os.write on journal files writes `after_bytes` once, then fails with ENOSPC."""
    real = os.write
    failed: list[int] = []

    def write(fd: int, data: bytes | memoryview) -> int:
        if not os.readlink(f"/proc/self/fd/{fd}").endswith(".jsonl"):
            return real(fd, data)
        if failed:
            raise OSError(errno.ENOSPC, "No space left on device")
        failed.append(fd)
        return real(fd, bytes(data)[:after_bytes])

    monkeypatch.setattr(os, "write", write)
    return failed


async def test_a_partial_write_is_cut_back_and_reported(
    journal: FileExecutionJournal, monkeypatch: pytest.MonkeyPatch
) -> None:
    """G-097 (journal part): a failed append raises, leaves no partial line, and the journal
    keeps working."""
    first = started("x-1")
    await journal.append(first)
    before = journal.path_for("x-1").read_bytes()
    second = request("x-1", "r-1")
    failed = _failing_writes(monkeypatch, after_bytes=10)
    with pytest.raises(JournalWriteError) as caught:
        await journal.append(second)
    assert failed
    assert caught.value.__cause__ is not None
    assert journal.path_for("x-1").read_bytes() == before
    monkeypatch.undo()
    await journal.append(second)
    assert await journal.read("x-1") == [first, second]


async def test_a_failed_first_append_leaves_no_file(
    journal: FileExecutionJournal, monkeypatch: pytest.MonkeyPatch
) -> None:
    _failing_writes(monkeypatch, after_bytes=0)
    with pytest.raises(JournalWriteError):
        await journal.append(started("x-1"))
    assert await journal.executions() == []
    assert list(journal.directory.iterdir()) == []


async def test_after_a_failed_fsync_the_journal_refuses_writes_until_reopened(
    journal: FileExecutionJournal, state: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Linux may drop the dirty pages of a failed fsync, so a retry cannot prove durability:
    the journal stops accepting writes until it is reopened."""
    await journal.append(started("x-1"))

    def broken_fsync(fd: int) -> None:
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(os, "fsync", broken_fsync)
    with pytest.raises(JournalWriteError):
        await journal.append(request("x-1", "r-1"))
    monkeypatch.undo()
    for attempt in (journal.append(request("x-1", "r-2")), journal.discard("x-1")):
        with pytest.raises(JournalWriteError, match="reopen"):
            await attempt
    assert len(await journal.read("x-1")) in (1, 2)  # reads still work
    await journal.aclose()
    async with FileExecutionJournal(state, SESSION) as reopened:
        await reopened.append(request("x-1", "r-2"))
        assert [r.id for r in await reopened.read("x-1")][-1] == "x-1:request:r-2"


async def test_cancelling_an_append_in_flight_never_tears_its_line(
    journal: FileExecutionJournal, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The append's file work is not abandoned on cancel: it completes, whole, and is known."""
    reached = trio.Event()
    release = threading.Event()
    real = os.fsync
    token = trio.lowlevel.current_trio_token()

    def slow_fsync(fd: int) -> None:
        trio.from_thread.run_sync(reached.set, trio_token=token)
        release.wait(30)
        real(fd)

    monkeypatch.setattr(os, "fsync", slow_fsync)
    record = request("x-1", "r-1")
    outcome: list[str] = []

    async def append_then_note(scope_box: list[trio.CancelScope]) -> None:
        with trio.CancelScope() as scope:
            scope_box.append(scope)
            await journal.append(record)
            outcome.append("returned")
            await trio.lowlevel.checkpoint()
            outcome.append("not cancelled")

    with trio.fail_after(30):
        async with trio.open_nursery() as nursery:
            box: list[trio.CancelScope] = []
            nursery.start_soon(append_then_note, box)
            await reached.wait()
            box[0].cancel()
            release.set()
    monkeypatch.undo()
    assert outcome == ["returned"]
    assert journal.path_for("x-1").read_bytes() == encode_journal_record(record)
    await journal.append(record)  # known: no second line
    assert await journal.read("x-1") == [record]


async def test_an_empty_record_id_is_refused(journal: FileExecutionJournal) -> None:
    with pytest.raises(InputRejected):
        await journal.append(msgspec.structs.replace(request("x-1", "r-1"), id=""))
    assert await journal.executions() == []


async def test_reads_are_independent_of_the_in_memory_index(
    journal: FileExecutionJournal,
) -> None:
    """A record appended, then read back, is a fresh decoded object equal to the original."""
    record = request("x-1", "r-1")
    await journal.append(record)
    (read,) = await journal.read("x-1")
    assert isinstance(read, RequestRecord)
    assert read == record
    assert read is not record
