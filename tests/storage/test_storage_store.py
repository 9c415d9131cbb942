"""The file session store: outcomes, refusals, preservation, permissions (G-001…G-012)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import msgspec
import pytest
from msgspec import UNSET

from protocol.errors import RecordCorrupt, RecordUnsupported, SessionExists, SessionNotFound
from robotad.storage import fsio
from robotad.storage.record import (
    Corrupt,
    ForkedFrom,
    SessionRecord,
    Unsupported,
    Valid,
    encode_record,
)
from robotad.storage.refusal import InputRejected
from robotad.storage.store import FileSessionStore, Missing

from .storage_factories import envelope_bytes, make_record, record_builtins


@pytest.fixture
def store(tmp_path: Path) -> FileSessionStore:
    return FileSessionStore(tmp_path / "state")


def _plant(store: FileSessionStore, session_id: str, data: bytes) -> Path:
    fsio.ensure_private_dir(store.directory)
    path = store.path_for(session_id)
    path.write_bytes(data)
    return path


def test_an_unknown_id_is_missing(store: FileSessionStore) -> None:
    """G-001: no file → Missing (never corrupt, never an empty record)."""
    assert store.load("nobody") == Missing()
    with pytest.raises(SessionNotFound):
        store.update("nobody", lambda record: record)


def test_a_saved_record_loads_valid(store: FileSessionStore) -> None:
    record = make_record("s-1")
    store.save(record)
    outcome = store.load("s-1")
    assert isinstance(outcome, Valid)
    assert outcome.record == record


def test_a_corrupt_record_loads_corrupt_with_every_issue(store: FileSessionStore) -> None:
    """G-002: corrupt, with each failing location; never missing or partial."""
    obj = record_builtins(make_record("bad"))
    obj["cwd"] = None
    obj["messages"][0]["role"] = "god"
    _plant(store, "bad", envelope_bytes(obj))
    outcome = store.load("bad")
    assert isinstance(outcome, Corrupt)
    assert {i["path"] for i in outcome.issues} == {"$.record.cwd", "$.record.messages[0].role"}


def test_an_unsupported_version_loads_unsupported(store: FileSessionStore) -> None:
    """G-003: the schemaVersion is carried."""
    _plant(store, "future", envelope_bytes(record_builtins(), version=7))
    assert store.load("future") == Unsupported(7)


@pytest.mark.parametrize("version", [1, 7])
def test_damaged_records_are_never_overwritten(store: FileSessionStore, version: int) -> None:
    """G-004 (and the seeds' write-path rule): save and update refuse a corrupt or unsupported
    file and leave it byte-for-byte unchanged; list and load do not touch it."""
    obj = record_builtins(make_record("dmg"))
    obj["turnCount"] = "many"
    original = envelope_bytes(obj, version=version)
    path = _plant(store, "dmg", original)
    expected = RecordCorrupt if version == 1 else RecordUnsupported
    with pytest.raises(expected) as caught:
        store.save(make_record("dmg"))
    if version == 1:
        assert caught.value.data is not None
        assert caught.value.data["issues"] == [
            {"path": "$.record.turnCount", "message": "expected integer, got string"}
        ]
    else:
        assert caught.value.data == {
            "sessionId": "dmg",
            "schemaVersion": 7,
            "path": "sessions/dmg.json",
        }
    with pytest.raises(expected):
        store.update("dmg", lambda record: record)
    store.list()
    store.load("dmg")
    assert path.read_bytes() == original


def test_create_refuses_any_existing_file(store: FileSessionStore) -> None:
    """G-005: valid, corrupt or unsupported — create never replaces it."""
    store.create(make_record("ok"))
    _plant(store, "corrupt", b"{not json")
    _plant(store, "future", envelope_bytes(record_builtins(), version=3))
    for session_id in ("ok", "corrupt", "future"):
        before = store.path_for(session_id).read_bytes()
        with pytest.raises(SessionExists) as caught:
            store.create(make_record(session_id))
        assert caught.value.data == {"sessionId": session_id}
        assert store.path_for(session_id).read_bytes() == before


def test_list_shows_damaged_records_with_their_status(store: FileSessionStore) -> None:
    """G-006: every stored record is listed, newest updatedAt first; damaged ones marked."""
    store.save(make_record("old", updated_at="2024-01-01T00:00:00Z"))
    store.save(make_record("new", updated_at="2025-01-01T00:00:00Z", title="Newest"))
    store.save(
        make_record(
            "forked",
            updated_at="2024-06-01T00:00:00+02:00",
            forked_from=ForkedFrom("old", "m-1"),
        )
    )
    broken = record_builtins(make_record("broken", updated_at="2024-03-01T00:00:00Z"))
    broken["messages"][0]["state"] = "??"
    _plant(store, "broken", envelope_bytes(broken))
    _plant(store, "future", envelope_bytes(record_builtins(), version=9))
    _plant(store, "garbage", b"\x00\x01")
    (store.directory / ".old.json.1234abcd.tmp").write_bytes(b"partial")
    (store.directory / "notes.txt").write_text("not a record")

    rows = store.list()
    # "future" carries the factory's 2024-05-01 updatedAt; "garbage" has none and goes last.
    order = ["new", "forked", "future", "broken", "old", "garbage"]
    assert [row.session_id for row in rows] == order
    by_id = {row.session_id: row for row in rows}
    assert by_id["new"].status == "ok"
    assert by_id["new"].title == "Newest"
    assert by_id["new"].message_count == 3
    assert by_id["forked"].forked_from == ForkedFrom("old", "m-1")
    assert by_id["broken"].status == "corrupt"
    assert by_id["broken"].cwd == "/home/user/project"
    assert by_id["broken"].issues == [
        {
            "path": "$.record.messages[0].state",
            "message": 'expected one of "complete", "interrupted"',
        }
    ]
    assert by_id["future"].status == "unsupported"
    assert by_id["future"].schema_version == 9
    assert by_id["garbage"].status == "corrupt"


def test_a_record_copied_under_another_name_is_corrupt_and_never_saved_over(
    store: FileSessionStore,
) -> None:
    """A backup made by hand (``cp V.json V-backup.json``) names V inside: loading it as V
    would let its saves overwrite V's newer history. It is corrupt at ``$.record.id``, listed
    so (its readable members shown), and never written over."""
    store.save(make_record("v"))
    copied = store.path_for("v").read_bytes()
    path = _plant(store, "v-backup", copied)
    outcome = store.load("v-backup")
    assert isinstance(outcome, Corrupt)
    [issue] = outcome.issues
    assert issue["path"] == "$.record.id"
    assert "names session 'v', but its file is v-backup.json" in issue["message"]
    row = {row.session_id: row for row in store.list()}["v-backup"]
    assert (row.status, row.cwd) == ("corrupt", "/home/user/project")
    assert row.updated_at == "2024-05-01T12:05:00.250Z"
    with pytest.raises(RecordCorrupt):
        store.save(msgspec.structs.replace(make_record("v"), id="v-backup"))
    assert path.read_bytes() == copied
    assert isinstance(store.load("v"), Valid)


def test_a_damaged_records_unreadable_timestamps_are_listed_as_none(
    store: FileSessionStore,
) -> None:
    """`session/list` shows null for a member it cannot read, never the damaged text."""
    obj = record_builtins(make_record("d"))
    obj["updatedAt"] = "not a day"
    _plant(store, "d", envelope_bytes(obj))
    [row] = store.list()
    assert (row.status, row.created_at, row.updated_at) == ("corrupt", "2024-05-01T12:00:00Z", "")


def test_list_notices_a_record_changed_behind_its_back(store: FileSessionStore) -> None:
    """The listing cache never hides damage done after an earlier listing."""
    store.save(make_record("s"))
    assert store.list()[0].status == "ok"
    store.path_for("s").write_bytes(b"{}")
    assert store.list()[0].status == "corrupt"
    store.delete("s")
    assert store.list() == []


def test_records_and_folders_are_owner_only_whatever_the_umask(tmp_path: Path) -> None:
    """G-009: 0600 files and 0700 folders even under a permissive umask."""
    previous = os.umask(0)
    try:
        store = FileSessionStore(tmp_path / "state")
        store.save(make_record("a"))
        store.create(make_record("b"))
    finally:
        os.umask(previous)
    for folder in (tmp_path / "state", store.directory):
        assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    for name in ("a", "b"):
        assert stat.S_IMODE(store.path_for(name).stat().st_mode) == 0o600


def test_resave_keeps_fields_the_session_does_not_own(store: FileSessionStore) -> None:
    """G-011: name, title, forkedFrom, createdAt and metadata written by another writer survive
    a save that refreshes only the session-owned members."""
    store.save(make_record("s", metadata={"session": 1}))
    store.update(
        "s",
        lambda r: msgspec.structs.replace(
            r,
            name="renamed",
            title="A title",
            forked_from=ForkedFrom("p", "m-2"),
            metadata={**r.metadata, "pinned": True, "session": "other writer"},
        ),
    )
    fresh = make_record(
        "s",
        messages=5,
        created_at="2030-01-01T00:00:00Z",
        updated_at="2030-01-02T00:00:00Z",
        cwd="/elsewhere",
        metadata={"session": 2, "added": "x"},
        turn_count=2,
    )
    written = store.save(fresh)
    outcome = store.load("s")
    assert isinstance(outcome, Valid)
    assert outcome.record == written
    stored = outcome.record
    assert stored.name == "renamed"
    assert stored.title == "A title"
    assert stored.forked_from == ForkedFrom("p", "m-2")
    assert stored.created_at == "2024-05-01T12:00:00Z"
    assert stored.metadata == {"session": "other writer", "pinned": True, "added": "x"}
    assert stored.messages == fresh.messages
    assert stored.cwd == "/elsewhere"
    assert stored.updated_at == "2030-01-02T00:00:00Z"
    assert stored.turn_count == 2
    assert stored.omitted_prompt is UNSET


def test_metadata_is_stored_as_data_only(store: FileSessionStore) -> None:
    """G-012 (store side): mode-, rule- and command-like metadata values are kept verbatim and
    never change the stored settings."""
    record = make_record(
        "s",
        metadata={"permissionMode": "bypassPermissions", "allow": ["Bash(*)"], "run": "rm -rf /"},
    )
    store.save(record)
    outcome = store.load("s")
    assert isinstance(outcome, Valid)
    assert outcome.record.settings == record.settings
    assert outcome.record.metadata == record.metadata


@pytest.mark.parametrize("bad", ["..", ".", "a/b", "", "x" * 129, "../etc/passwd", ".hidden"])
def test_unsafe_ids_are_refused_before_any_path_is_built(tmp_path: Path, bad: str) -> None:
    """G-156: -32602 for every operation; nothing is created."""
    store = FileSessionStore(tmp_path / "state")
    for attempt in (
        lambda: store.load(bad),
        lambda: store.save(_with_id(bad)),
        lambda: store.create(_with_id(bad)),
        lambda: store.delete(bad),
    ):
        with pytest.raises(InputRejected) as caught:
            attempt()
        assert caught.value.issues[0]["path"] == "$.sessionId"
    assert not (tmp_path / "state").exists()


def _with_id(session_id: str) -> SessionRecord:
    record = make_record()
    # Bypass the Struct's own pattern check: the store must refuse such an id by itself.
    return msgspec.structs.replace(record, id=session_id)


def test_a_symlink_planted_at_a_record_path_is_never_followed(
    store: FileSessionStore, tmp_path: Path
) -> None:
    """A link at the record path loads as corrupt and every write path refuses it: the link's
    target is neither read, written, nor replaced."""
    target = tmp_path / "victim.json"
    target.write_bytes(encode_record(make_record("s")))
    fsio.ensure_private_dir(store.directory)
    store.path_for("s").symlink_to(target)
    assert isinstance(store.load("s"), Corrupt)
    with pytest.raises(RecordCorrupt):
        store.save(make_record("s", cwd="/attacker"))
    with pytest.raises(SessionExists):
        store.create(make_record("s"))
    assert store.list()[0].status == "corrupt"
    assert store.path_for("s").is_symlink()
    assert target.read_bytes() == encode_record(make_record("s"))


def test_a_fifo_at_a_record_path_does_not_block(store: FileSessionStore) -> None:
    fsio.ensure_private_dir(store.directory)
    os.mkfifo(store.path_for("pipe"))
    assert isinstance(store.load("pipe"), Corrupt)


def test_delete_removes_only_that_record(store: FileSessionStore) -> None:
    store.save(make_record("a"))
    store.save(make_record("b"))
    assert store.delete("a") is True
    assert store.delete("a") is False
    assert store.load("a") == Missing()
    assert isinstance(store.load("b"), Valid)


def test_update_rewrites_exactly_what_it_returns(store: FileSessionStore) -> None:
    store.save(make_record("s"))
    store.update("s", lambda r: msgspec.structs.replace(r, title="new"))
    outcome = store.load("s")
    assert isinstance(outcome, Valid)
    assert outcome.record.title == "new"
    with pytest.raises(ValueError, match="id"):
        store.update("s", lambda r: msgspec.structs.replace(r, id="other"))


@pytest.mark.parametrize("first", ["create", "save"])
def test_the_first_record_makes_its_folders_durable_in_their_parents(
    tmp_path: Path, fsyncs: list[str], first: str
) -> None:
    """G-007, G-008: the first record of a fresh state folder creates ``state/sessions``; each
    new folder's entry is synced in its parent before the record is written, so a power cut
    cannot take an acknowledged first session away with a folder whose entry never reached
    the disk. The record's own fsyncs come after; a later record syncs only its own two."""
    store = FileSessionStore(tmp_path / "state")
    getattr(store, first)(make_record("a"))
    parents = [os.path.realpath(folder) for folder in (tmp_path, tmp_path / "state")]
    assert fsyncs[:2] == parents
    assert fsyncs[-1] == os.path.realpath(store.directory)
    assert len(fsyncs) == 4
    fsyncs.clear()
    getattr(store, first)(make_record("b"))
    assert len(fsyncs) == 2
