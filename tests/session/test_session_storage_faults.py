"""A session whose disk refuses (PROTOCOL.md §10.1): a completed turn is acknowledged only once
saved, a refused save fails it with StorageFailed and the next save holds everything; a
session log that cannot be appended is reported and never stops a save. Also G-148: the
Session itself logs each text delta of a turn."""

from __future__ import annotations

import errno
from pathlib import Path

import pytest
import trio

from protocol.errors import ProviderFailed, StorageFailed
from robotad.storage.failure import StorageError
from robotad.storage.log_files import FileLogSink
from robotad.storage.session_log import SessionLogger
from tests.session.session_harness import (
    LIMIT,
    Events,
    FileLog,
    MemoryStore,
    ShoutTool,
    new_session,
    scripted,
)


class RefusingSink(FileLogSink):
    """A log sink on a full disk: every line is refused the way `FileLogSink` refuses it."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.refused = 0

    def append(self, line: bytes) -> None:
        self.refused += 1
        raise StorageError("logs/s-full.jsonl", "no space left on device", errno.ENOSPC)


async def test_a_refused_save_fails_the_turn_and_the_next_save_holds_everything(
    workspace: Path,
) -> None:
    events = Events()
    store = MemoryStore()
    session = new_session(
        workspace,
        scripted([{"text": "first"}, {"text": "second"}]),
        store=store,
        event_sink=events,
        session_id="s-disk",
    )
    store.fail = True
    with trio.fail_after(LIMIT), pytest.raises(StorageFailed) as refused:
        await session.run("one")
    assert refused.value.data == {
        "sessionId": "s-disk",
        "path": "sessions/s-disk.json",
        "reason": "no space left on device",
    }
    (failed,) = events.of("turn_finished")
    assert failed["status"] == "failed"
    assert failed["error"]["code"] == -32016
    assert store.saved == []  # nothing claimed saved
    store.fail = False  # the space comes back: same session, no restart
    with trio.fail_after(LIMIT):
        assert await session.run("two") == "second"
    contents = [m.content for m in store.last.messages]
    assert contents == ["one", "first", "two", "second"]


async def test_a_log_that_cannot_be_appended_is_reported_and_never_stops_a_save(
    workspace: Path,
) -> None:
    events = Events()
    store = MemoryStore()
    sink = RefusingSink(workspace / "unused.jsonl")
    session = new_session(
        workspace,
        scripted([{"text": "saved anyway", "chunks": 2}]),
        store=store,
        logger=SessionLogger("s-full", sink),
        event_sink=events,
        session_id="s-full",
    )
    with trio.fail_after(LIMIT):
        assert await session.run("go") == "saved anyway"
    assert store.last.messages[-1].content == "saved anyway"
    (finished,) = events.of("turn_finished")
    assert finished["status"] == "completed"
    assert sink.refused > 0
    assert finished["logFailure"] == {
        "path": "logs/s-full.jsonl",
        "reason": "no space left on device",
        "dropped": sink.refused,
    }
    assert events.typed("s-full")  # the event with logFailure decodes strictly


async def test_the_session_logs_every_text_delta(workspace: Path) -> None:
    """G-148, tested at the Session: each streamed delta is a ``text_delta`` log entry naming
    the provider request it belongs to."""
    log = FileLog(workspace, "s-deltas")
    session = new_session(
        workspace,
        scripted([{"text": "one two three", "chunks": 3}]),
        logger=log.logger,
        session_id="s-deltas",
    )
    with trio.fail_after(LIMIT):
        await session.run("go")
    entries = log.entries()
    deltas = [e.data for e in entries if e.event == "text_delta"]
    (request,) = [e.data for e in entries if e.event == "provider_request"]
    assert len(deltas) == 3
    assert "".join(d["text"] for d in deltas) == "one two three"
    assert {d["requestId"] for d in deltas} == {request["requestId"]}


async def test_a_refused_save_fails_a_manual_compaction_and_puts_history_back(
    workspace: Path,
) -> None:
    """PROTOCOL §10.1: a manual compaction is done only once saved. On a refused write it
    answers StorageFailed, its event says "failed" (never "completed"), and history is as it
    was: a client told it failed never finds it done, and the next save holds no summary."""
    events = Events()
    store = MemoryStore()
    session = new_session(
        workspace,
        scripted([{"text": "first"}, {"summary": "they said one"}, {"text": "second"}]),
        store=store,
        event_sink=events,
        session_id="s-compact",
    )
    with trio.fail_after(LIMIT):
        await session.run("one")
    history = session.get_history()
    saved_before = len(store.saved)
    store.fail = True
    with trio.fail_after(LIMIT), pytest.raises(StorageFailed) as refused:
        await session.compact()
    assert refused.value.data["path"] == "sessions/s-compact.json"
    assert len(store.saved) == saved_before  # nothing claimed saved
    assert [e["phase"] for e in events.of("compaction")] == ["started", "failed"]
    assert session.get_history() == history
    store.fail = False
    with trio.fail_after(LIMIT):
        assert await session.run("two") == "second"
    assert [m.content for m in store.last.messages if m.role != "system"] == [
        "one",
        "first",
        "two",
        "second",
    ]


async def test_a_refused_compaction_save_leaves_the_context_figures_as_they_were(
    workspace: Path,
) -> None:
    """G-178: a manual compaction whose save is refused puts back the figures with the
    history. The last message (a failed turn's prompt) carries no usage, so usedTokens is the
    latest usage seen; the compaction had forgotten it, and the figures fell to the estimate
    (so the next run could start under the auto-compact threshold it had reached)."""
    store = MemoryStore()
    used = {"inputTokens": 150, "outputTokens": 10}
    session = new_session(
        workspace,
        scripted(
            [{"text": "first", "usage": used}, {"error": "boom"}, {"summary": "one"}],
            context_window=1000,
        ),
        store=store,
        auto_compact_threshold=False,
    )
    with trio.fail_after(LIMIT):
        await session.run("one")
        with pytest.raises(ProviderFailed):
            await session.run("two")
    before = session.get_context_state()
    assert before.used_tokens == 160
    store.fail = True
    with trio.fail_after(LIMIT), pytest.raises(StorageFailed):
        await session.compact()
    assert session.get_context_state() == before


class FullSink(RefusingSink):
    """A full disk for sidecars too: each store of one is refused, its line dropped."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.stores_refused = 0

    def put_payload(self, content: bytes, sha256: str) -> str:
        self.stores_refused += 1
        raise StorageError("logs/s-full.payloads", "no space left on device", errno.ENOSPC)


async def test_every_line_a_full_disk_drops_is_counted_also_behind_a_failed_store(
    workspace: Path,
) -> None:
    """A tool result over the spill limit names a sidecar, stored on a worker thread while
    the lines logged after it wait (decision 76). The disk is full: the store fails, and
    so does each line behind it. Only the first failure of the lines was raised, in place
    of the store's own, so ``logFailure.dropped`` counted one line where several were lost."""
    events = Events()
    sink = FullSink(workspace / "unused.jsonl")
    session = new_session(
        workspace,
        scripted(
            [{"toolCalls": [{"name": "Shout", "arguments": {"text": "hi"}}]}, {"text": "done"}]
        ),
        tools=[ShoutTool(size=70_000)],
        permissions={"allow": ["Shout"]},
        logger=SessionLogger("s-full", sink),
        event_sink=events,
        session_id="s-full",
    )
    with trio.fail_after(LIMIT):
        assert await session.run("go") == "done"
    (finished,) = events.of("turn_finished")
    assert sink.stores_refused > 0
    assert finished["logFailure"]["dropped"] == sink.refused + sink.stores_refused
