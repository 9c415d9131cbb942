"""The store's memory of the bytes it last wrote: saves skip the decode, never the truth.

A save reads the stored file every time and decodes it only when its bytes differ from the ones
the store last wrote or decoded; these tests change the file behind the store's back between two
saves — through another store, by hand, in place with the same size — and check that the second
save sees every change exactly as a store without that memory would.
"""

from __future__ import annotations

import os
from pathlib import Path

import msgspec
import pytest
from msgspec import UNSET

from protocol.errors import RecordCorrupt, RecordUnsupported
from robotad.storage import store as store_module
from robotad.storage.record import SessionRecord, Valid, decode_record
from robotad.storage.store import KNOWN_RECORDS, FileSessionStore

from .storage_factories import envelope_bytes, make_record, record_builtins


@pytest.fixture
def store(tmp_path: Path) -> FileSessionStore:
    return FileSessionStore(tmp_path / "state")


@pytest.fixture
def decodes(monkeypatch: pytest.MonkeyPatch) -> list[bytes]:
    """Every stored file the store module decoded, in order."""
    seen: list[bytes] = []

    def counting(data: bytes | None) -> object:
        seen.append(data or b"")
        return decode_record(data)

    monkeypatch.setattr(store_module, "decode_record", counting)
    return seen


def _turn(store: FileSessionStore, messages: int) -> SessionRecord:
    """A save as a live session makes it: the session's own members, nothing else set."""
    return store.save(make_record("s", messages=messages, turn_count=messages))


def _stored(store: FileSessionStore) -> SessionRecord:
    outcome = store.load("s")
    assert isinstance(outcome, Valid)
    return outcome.record


def test_a_save_after_its_own_write_decodes_nothing(
    store: FileSessionStore, decodes: list[bytes]
) -> None:
    """The second save finds exactly the bytes the first wrote: no decode of the history."""
    _turn(store, 3)
    assert decodes == []  # nothing stored yet: written as given
    _turn(store, 6)
    _turn(store, 9)
    assert decodes == []
    assert _stored(store).messages == make_record("s", messages=9).messages


def test_a_name_written_by_another_store_between_saves_is_kept(store: FileSessionStore) -> None:
    """G-011: another writer (here a second store object) renames the record between two saves
    of this store; the second save keeps the name and the other writer's metadata."""
    _turn(store, 3)
    other = FileSessionStore(store.directory.parent)
    other.update(
        "s",
        lambda r: msgspec.structs.replace(r, name="renamed", metadata={"pinned": True}),
    )
    _turn(store, 6)
    stored = _stored(store)
    assert stored.name == "renamed"
    assert stored.metadata == {"pinned": True}
    assert stored.turn_count == 6


def test_a_same_size_rewrite_in_place_is_still_seen(store: FileSessionStore) -> None:
    """G-011: an in-place rewrite that keeps the inode and the size — what a check of file
    times and sizes can miss within one timestamp tick — is seen, because bytes are compared."""
    store.save(make_record("s", messages=3, name="aaaa"))
    path = store.path_for("s")
    before = path.read_bytes()
    after = before.replace(b'"name":"aaaa"', b'"name":"bbbb"')
    assert len(after) == len(before)
    assert after != before
    inode = os.stat(path).st_ino
    with open(path, "r+b") as handle:
        handle.write(after)
    assert os.stat(path).st_ino == inode
    _turn(store, 6)
    assert _stored(store).name == "bbbb"


def test_a_corrupt_file_appearing_between_saves_is_refused_untouched(
    store: FileSessionStore,
) -> None:
    """G-004: a file made corrupt behind the store's back after its last write is refused by
    the next save and stays byte-identical."""
    _turn(store, 3)
    path = store.path_for("s")
    damaged = path.read_bytes()[:-7]
    path.write_bytes(damaged)
    with pytest.raises(RecordCorrupt):
        _turn(store, 6)
    assert path.read_bytes() == damaged


def test_an_unsupported_file_appearing_between_saves_is_refused_untouched(
    store: FileSessionStore,
) -> None:
    """G-004: the same for a record of another schema version."""
    _turn(store, 3)
    path = store.path_for("s")
    future = envelope_bytes(record_builtins(make_record("s")), version=2)
    path.write_bytes(future)
    with pytest.raises(RecordUnsupported):
        _turn(store, 6)
    assert path.read_bytes() == future


def test_a_symlink_appearing_between_saves_is_refused(
    store: FileSessionStore, tmp_path: Path
) -> None:
    """A symlink swapped in at the record path after a save (pointing at a copy of the very
    bytes the store wrote) is refused by the next save, never followed or replaced."""
    _turn(store, 3)
    path = store.path_for("s")
    target = tmp_path / "elsewhere.json"
    written = path.read_bytes()
    target.write_bytes(written)
    path.unlink()
    path.symlink_to(target)
    with pytest.raises(RecordCorrupt):
        _turn(store, 6)
    assert path.is_symlink()
    assert target.read_bytes() == written


def test_a_record_removed_between_saves_is_written_as_given(store: FileSessionStore) -> None:
    """With the file gone, nothing remembered is merged in: the record is written as given."""
    store.save(make_record("s", messages=3, name="old name", metadata={"k": 1}))
    os.unlink(store.path_for("s"))
    _turn(store, 6)
    stored = _stored(store)
    assert stored.name is UNSET
    assert stored.metadata == {}


def test_changing_a_loaded_record_does_not_change_what_a_save_keeps(
    store: FileSessionStore,
) -> None:
    """G-011: what the store remembers is its own copy: a caller editing the metadata of a
    record it loaded (without writing it) cannot slip that edit into the next save."""
    store.save(make_record("s", messages=3, metadata={"owner": {"name": "ann"}}))
    loaded = _stored(store)
    loaded.metadata["owner"]["name"] = "mallory"
    loaded.metadata["extra"] = True
    _turn(store, 6)
    assert _stored(store).metadata == {"owner": {"name": "ann"}}


def test_forgotten_and_evicted_ids_are_decoded_again(
    store: FileSessionStore, decodes: list[bytes]
) -> None:
    """`forget` and the bound on remembered ids only cost a decode, never a wrong merge."""
    store.save(make_record("s", messages=3, name="kept"))
    store.forget("s")
    _turn(store, 6)
    assert len(decodes) == 1
    for index in range(KNOWN_RECORDS):
        store.save(make_record(f"o-{index}", messages=1))
    decodes.clear()
    _turn(store, 9)
    assert len(decodes) == 1  # "s" was pushed out by newer ids
    assert _stored(store).name == "kept"
