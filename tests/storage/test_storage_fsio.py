"""Durable owner-only file primitives and session-id validation (G-007…G-009, G-156)."""

from __future__ import annotations

import os
import stat
import threading
from pathlib import Path

import pytest

from robotad.storage import fsio
from robotad.storage.ids import is_safe_session_id, validate_session_id
from robotad.storage.log_files import FileLogSink
from robotad.storage.refusal import InputRejected


def test_atomic_write_is_temp_fsync_rename_fsync_dir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """G-008: the data is fsynced in a same-folder temp file, renamed over the target, and
    the folder fsynced after the rename."""
    calls: list[tuple[str, str]] = []
    real_fsync, real_rename = os.fsync, os.rename

    def fsync(fd: int) -> None:
        target = os.readlink(f"/proc/self/fd/{fd}")
        calls.append(("fsync", target))
        real_fsync(fd)

    def rename(src: str | Path, dst: str | Path) -> None:
        assert Path(src).parent == Path(dst).parent
        calls.append(("rename", str(dst)))
        real_rename(src, dst)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "rename", rename)
    target = tmp_path / "r.json"
    fsio.atomic_write(target, b"new")
    kinds = [kind for kind, _ in calls]
    assert kinds == ["fsync", "rename", "fsync"]
    assert calls[0][1].startswith(str(tmp_path / ".r.json."))
    assert calls[2][1] == str(tmp_path)
    assert target.read_bytes() == b"new"


def test_a_failed_write_leaves_the_old_file_and_no_temp(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """G-007: a failure at any step keeps the previous bytes and cleans up."""
    target = tmp_path / "r.json"
    fsio.atomic_write(target, b"old")

    def broken(*args: object) -> None:
        raise OSError(28, "No space left on device")

    for step in ("fsync", "rename"):
        with monkeypatch.context() as patch:
            patch.setattr(os, step, broken)
            with pytest.raises(OSError, match="No space"):
                fsio.atomic_write(target, b"new" * 1000)
        assert target.read_bytes() == b"old"
        assert os.listdir(tmp_path) == ["r.json"]


def test_files_and_folders_are_owner_only_under_any_umask(tmp_path: Path) -> None:
    """G-009: modes are set explicitly, never left to the umask (strict or lax)."""
    for mask in (0o000, 0o077, 0o277):
        previous = os.umask(mask)
        try:
            folder = fsio.ensure_private_dir(tmp_path / f"m{mask:o}" / "deep")
            fsio.atomic_write(folder / "a", b"x")
            sink = FileLogSink(folder / "b", root=folder)
            sink.append(b"x")
            sink.close()
            fsio.create_exclusive(folder / "c", b"x")
        finally:
            os.umask(previous)
        for path in (folder, folder.parent):
            assert stat.S_IMODE(path.stat().st_mode) == 0o700
        for name in ("a", "b", "c"):
            assert stat.S_IMODE((folder / name).stat().st_mode) == 0o600


def test_symlinks_are_never_followed(tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.write_bytes(b"precious")
    link = tmp_path / "link"
    link.symlink_to(victim)
    with pytest.raises(fsio.UnsafePath):
        fsio.read_regular(link)
    with pytest.raises(OSError):  # noqa: PT011 - O_NOFOLLOW refuses the append
        FileLogSink(link, root=tmp_path).append(b"evil")
    with pytest.raises(fsio.UnsafePath):
        fsio.ensure_private_dir(link)
    assert fsio.create_exclusive(link, b"evil") is False
    fsio.atomic_write(link, b"replaced")
    assert not link.is_symlink()
    assert victim.read_bytes() == b"precious"


def test_non_regular_files_are_refused_without_blocking(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(fsio.UnsafePath):
        fsio.read_regular(fifo)
    with pytest.raises(fsio.UnsafePath):
        fsio.read_regular(tmp_path)
    assert fsio.read_regular(tmp_path / "absent") is None


def test_append_after_a_torn_line_keeps_the_new_line_whole(tmp_path: Path) -> None:
    """The torn line a dead writer left is cut away (`FileLogSink`), the new one whole."""
    path = tmp_path / "log.jsonl"
    path.write_bytes(b'{"whole": 1}\n{"torn')
    sink = FileLogSink(path, root=tmp_path)
    sink.append(b'{"next": 2}')
    sink.close()
    assert path.read_bytes().splitlines() == [b'{"whole": 1}', b'{"next": 2}']


def test_create_exclusive_takes_its_name_back_when_the_folder_cannot_be_synced(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """All or nothing: linked, then the folder's sync failed (here: out of descriptors to open
    it) — the name is gone again and the error raised, so a caller told "failed" finds no file
    (a session record used to stay behind a failed create)."""

    def exhausted(directory: Path) -> None:
        raise OSError(24, "Too many open files")

    monkeypatch.setattr(fsio, "fsync_dir", exhausted)
    with pytest.raises(OSError, match="Too many open files"):
        fsio.create_exclusive(tmp_path / "record.json", b"{}")
    assert sorted(p.name for p in tmp_path.iterdir()) == []  # neither the name nor a temp


def test_create_exclusive_never_replaces(tmp_path: Path) -> None:
    path = tmp_path / "c"
    assert fsio.create_exclusive(path, b"first") is True
    assert fsio.create_exclusive(path, b"second") is False
    assert path.read_bytes() == b"first"
    assert os.listdir(tmp_path) == ["c"]


@pytest.mark.parametrize("good", ["a", "A9", "s-1", "session.v2_x", "0" * 128, "a..b", "a.", "x-"])
def test_safe_ids(good: str) -> None:
    assert is_safe_session_id(good)
    assert validate_session_id(good) == good


@pytest.mark.parametrize(
    "bad",
    ["", ".", "..", "...", ".a", "-a", "_a", "a/b", "a\\b", "a b", "a\nb", "é", "0" * 129, None, 5],
)
def test_unsafe_ids_are_refused(bad: object) -> None:
    """G-156: -32602 with a located issue that does not echo the id."""
    assert not is_safe_session_id(bad)
    with pytest.raises(InputRejected) as caught:
        validate_session_id(bad)
    (issue,) = caught.value.issues
    assert issue["path"] == "$.sessionId"
    if isinstance(bad, str) and len(bad) >= 3:
        assert bad not in issue["message"]


def test_a_linked_parent_is_the_users_choice_but_a_linked_folder_is_refused(
    tmp_path: Path,
) -> None:
    real = tmp_path / "real-state"
    real.mkdir()
    (tmp_path / "state").symlink_to(real)
    created = fsio.ensure_private_dir(tmp_path / "state" / "sessions")
    assert (real / "sessions").is_dir()
    assert stat.S_IMODE(created.stat().st_mode) == 0o700
    (tmp_path / "logs").symlink_to(real)
    with pytest.raises(fsio.UnsafePath):
        fsio.ensure_private_dir(tmp_path / "logs")


def test_a_durable_folder_whose_parent_cannot_be_synced_is_not_left_behind(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`ensure_durable_dir` is all or nothing: a new folder whose entry could not be made
    durable is removed again, so the next call makes it (and syncs it) afresh instead of
    taking it for a durable one. A folder that exists is checked with one ``lstat``, and
    nothing is synced."""
    target = tmp_path / "logs" / "s-1.payloads"
    real = os.fsync

    def failing(fd: int) -> None:
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(os, "fsync", failing)
    with pytest.raises(OSError, match="Input/output error"):
        fsio.ensure_durable_dir(target)
    assert not (tmp_path / "logs").exists()
    synced: list[str] = []

    def spy(fd: int) -> None:
        synced.append(os.readlink(f"/proc/self/fd/{fd}"))
        real(fd)

    monkeypatch.setattr(os, "fsync", spy)
    assert fsio.ensure_durable_dir(target) == target
    assert synced == [os.path.realpath(tmp_path), os.path.realpath(tmp_path / "logs")]
    assert stat.S_IMODE(target.stat().st_mode) == 0o700
    synced.clear()
    assert fsio.ensure_durable_dir(target) == target
    assert synced == []
    (tmp_path / "link").symlink_to(target)
    with pytest.raises(fsio.UnsafePath):
        fsio.ensure_durable_dir(tmp_path / "link")


#: Seconds a test waits at most for a thread it holds at a gate (a broken test ends).
HELD = 5


def _held_parent_sync(
    monkeypatch: pytest.MonkeyPatch, parent: Path
) -> tuple[threading.Event, threading.Event, list[bool]]:
    """`fsio.fsync_dir(parent)` from now on signals `syncing`, then waits for `gate` (noting
    in the list whether it was let go, or gave up waiting) before it syncs."""
    syncing, gate, let_go = threading.Event(), threading.Event(), []
    real = fsio.fsync_dir

    def held(directory: Path) -> None:
        if directory == parent:
            syncing.set()
            let_go.append(gate.wait(HELD))
        real(directory)

    monkeypatch.setattr(fsio, "fsync_dir", held)
    return syncing, gate, let_go


def test_a_folder_that_exists_waits_for_no_other_folder_being_made_durable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A session log is opened on the event loop (its first line, or the first after
    `open_logs` closed it), and its folder, long there, is looked at with
    `ensure_durable_dir`: one ``lstat``. It waited while another thread made a folder of its
    own durable (a new session's journal or payload folder: an fsync of the folder holding
    it, tens of milliseconds under load), the one lock held across that fsync, so the loop
    waited out another thread's fsync. Only a folder being made, or one in it, waits."""
    logs = fsio.ensure_durable_dir(tmp_path / "logs")
    syncing, gate, let_go = _held_parent_sync(monkeypatch, tmp_path)
    maker = threading.Thread(target=fsio.ensure_durable_dir, args=(tmp_path / "journal" / "s-1",))
    maker.start()
    try:
        assert syncing.wait(HELD)
        sink = FileLogSink(logs / "s-2.jsonl")
        sink.append(b"{}")  # on this thread while the other holds its sync: not held with it
        sink.close()
    finally:
        gate.set()
        maker.join(HELD)
    assert let_go == [True], "the log waited for another folder's sync"
    assert (tmp_path / "journal" / "s-1").is_dir()


class _NotedWaits(dict[Path, threading.Event]):
    """`fsio._unsettled`, noting (`found`) when a look finds a folder being made durable."""

    def __init__(self) -> None:
        super().__init__()
        self.found = threading.Event()

    def get(self, key: Path, default: object = None) -> object:  # type: ignore[override]
        value = super().get(key, default)
        if value is not None:
            self.found.set()
        return value


def test_a_folder_in_one_being_made_durable_waits_until_it_is(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What the one lock was for, kept: a thread asking for a folder another thread has just
    made (or one inside it) returns only once that folder's entry is durable, and a file it
    then creates there can never outlive the folder in a power cut."""
    waits = _NotedWaits()
    monkeypatch.setattr(fsio, "_unsettled", waits)
    syncing, gate, let_go = _held_parent_sync(monkeypatch, tmp_path)
    maker = threading.Thread(target=fsio.ensure_durable_dir, args=(tmp_path / "journal" / "s-1",))
    returned: list[bool] = []

    def asking(directory: Path) -> None:
        fsio.ensure_durable_dir(directory)
        returned.append(gate.is_set())

    askers = [
        threading.Thread(target=asking, args=(tmp_path / "journal",)),
        threading.Thread(target=asking, args=(tmp_path / "journal" / "s-2",)),
    ]
    maker.start()
    try:
        assert syncing.wait(HELD)
        for asker in askers:
            waits.found.clear()
            asker.start()
            assert waits.found.wait(HELD), "it did not look for the folder being made"
    finally:
        gate.set()
        for thread in (maker, *askers):
            thread.join(HELD)
    assert let_go == [True]
    assert returned == [True, True], "a folder was taken before its entry was durable"
    assert (tmp_path / "journal" / "s-2").is_dir()
    assert waits == {}


@pytest.mark.parametrize(("mask", "changes"), [(0o022, 0), (0o077, 0), (0o277, 1)])
def test_a_new_file_is_chmodded_only_when_the_umask_took_an_owner_bit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mask: int, changes: int
) -> None:
    """G-009 at the cost of one ``fstat``: a chmod is an inode change the next fsync
    journals, so a file created 0600 that is 0600 is left alone; one the umask left 0400 is
    set right."""
    calls: list[int] = []
    chmod = os.fchmod

    def counted(fd: int, mode: int) -> None:
        calls.append(mode)
        chmod(fd, mode)

    monkeypatch.setattr(os, "fchmod", counted)
    previous = os.umask(mask)
    try:
        fsio.atomic_write(tmp_path / "a", b"x")
    finally:
        os.umask(previous)
    assert len(calls) == changes
    assert stat.S_IMODE((tmp_path / "a").stat().st_mode) == 0o600
