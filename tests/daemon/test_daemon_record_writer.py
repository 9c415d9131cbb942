"""The daemon's record writer on a long history: what a save does on the event loop.

A save of a long session used to encode the whole snapshot on the event loop (for the digest
that tells an unchanged snapshot) and the store encoded the history again in its thread. Now
the history is encoded once a save, off the loop, and the store writes that encoding; the
written record, and the skip of an unchanged snapshot, are as before.
"""

from __future__ import annotations

import threading
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import msgspec
import pytest

import robotad.daemon.live as live
from protocol.shapes import Message
from robotad.session.ports import SessionSnapshot
from robotad.storage.record import Valid, decode_record, encode_messages, encode_record
from robotad.storage.store import FileSessionStore

T0 = datetime(2025, 1, 1, tzinfo=UTC)
CREATED = "2025-01-01T00:00:00Z"


def snapshot(messages: int) -> SessionSnapshot:
    history = [
        Message(f"m-{i}", "user" if i % 2 == 0 else "assistant", f"text {i} " * 20, "complete", T0)
        for i in range(messages)
    ]
    return SessionSnapshot(
        session_id="long",
        cwd="/w",
        messages=history,
        system_prompt=None,
        tool_schemas=[],
        provider="scripted",
        model="scripted",
        permission_mode="default",
        permissions={"allow": [], "ask": [], "deny": []},
        auto_compact_threshold=False,
        turn_count=messages // 2,
    )


class _Watched:
    """An encoder that notes the thread and size of every encoding."""

    def __init__(self, calls: list[tuple[bool, int]]) -> None:
        self._inner = msgspec.json.Encoder()
        self._calls = calls

    def encode(self, value: Any) -> bytes:
        data = self._inner.encode(value)
        self._calls.append((threading.current_thread() is threading.main_thread(), len(data)))
        return data


def test_encode_messages_is_the_lists_encoding_in_batches() -> None:
    for count in (0, 1, 255, 256, 257, 700):
        messages = snapshot(count).messages
        assert bytes(encode_messages(messages)) == msgspec.json.encode(messages)


async def test_a_save_encodes_the_history_once_and_never_on_the_loop(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    state = snapshot(2_000)
    whole = len(msgspec.json.encode(state.messages))
    store = FileSessionStore(tmp_path)
    writer = live.RecordWriter(store, created_at=CREATED, updated_at=CREATED)
    encodes: list[tuple[bool, int]] = []
    history_encodes: list[bool] = []
    given: list[bool] = []

    def watched_history(messages: Any) -> bytearray:
        history_encodes.append(threading.current_thread() is threading.main_thread())
        return encode_messages(messages)

    save = store.save

    def watched_save(record: Any, **options: Any) -> Any:
        given.append(options.get("messages") is not None)
        return save(record, **options)

    monkeypatch.setattr(live, "_encoder", _Watched(encodes))
    monkeypatch.setattr(live, "encode_messages", watched_history, raising=False)
    monkeypatch.setattr(store, "save", watched_save)

    changed = msgspec.structs.replace(state, turn_count=state.turn_count + 1)
    await writer.save(changed)

    on_loop = [size for main, size in encodes if main]
    assert max(on_loop, default=0) < whole // 10, "the loop encoded the whole history"
    assert history_encodes == [False]  # once, off the loop
    assert given == [True]  # the store wrote the save's own encoding, not a second one
    stored = decode_record(store.path_for("long").read_bytes())
    assert isinstance(stored, Valid)
    assert stored.record.messages == state.messages
    assert stored.record.turn_count == state.turn_count + 1


async def test_an_unchanged_snapshot_is_not_written_and_a_change_in_place_is(
    tmp_path: Path,
) -> None:
    state = snapshot(600)
    store = FileSessionStore(tmp_path)
    writer = live.RecordWriter(store, created_at=CREATED, updated_at=CREATED)
    await writer.remember(state)  # as a load does: this is what the store holds
    await writer.save(state)
    assert not store.path_for("long").exists()
    await writer.save(msgspec.structs.replace(state, turn_count=1))
    path = store.path_for("long")
    first = path.stat().st_ino
    await writer.save(msgspec.structs.replace(state, turn_count=1, messages=list(state.messages)))
    assert path.stat().st_ino == first  # nothing written
    state.messages[300].content = "edited in place"
    await writer.save(msgspec.structs.replace(state, turn_count=1, messages=list(state.messages)))
    stored = decode_record(path.read_bytes())
    assert isinstance(stored, Valid)
    assert stored.record.messages[300].content == "edited in place"


def test_a_spliced_history_writes_the_same_bytes(tmp_path: Path) -> None:
    state = snapshot(300)
    record = state.to_record(created_at=CREATED, updated_at=CREATED)
    bare = msgspec.structs.replace(record, messages=[])
    spliced = encode_record(bare, messages=encode_messages(state.messages))
    assert spliced == encode_record(record)
