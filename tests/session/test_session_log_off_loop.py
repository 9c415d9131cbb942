"""A provider request's tool set is stored off the event loop (architecture decision 62).

The first ``provider_request`` of a session names a sidecar not stored yet (its tools'
schemas): creating it takes two fsyncs, which ran on the event loop and held every other
session, RPC and event for their length. Now the sidecar is stored on a worker thread before
its line is written, and whatever the session logs meanwhile (the request's deltas, its
response, the turn's other lines) is written after it, so the log reads in the order it always
did and no line ever names a sidecar that is not there. The same holds for the whole history a
loaded session logs when it starts, whose sidecar a long history needs, and (architecture
decision 76) for every other line naming a sidecar the log does not hold yet: a tool result
over the spill limit (64 KiB), in its ``history_mutation`` and its ``tool_result``.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any

import msgspec
import pytest
import trio
import trio.testing

from protocol import events as wire
from protocol.errors import StorageFailed
from protocol.shapes import Message, TurnWaiting
from robotad.agent.provider import ModelReply, ModelRequest, StreamObserver
from robotad.session.reporting import SessionReporter
from robotad.session.session import Session
from robotad.storage import log_events
from robotad.storage.failure import StorageError
from robotad.storage.log_files import FileLogSink, FileLogSource
from robotad.storage.log_replay import validate_log
from robotad.storage.session_log import SessionLogger, decode_log
from robotad.storage.sidecars import DEFAULT_SPILL_LIMIT
from tests.journal_fakes import MemoryJournal
from tests.session.session_harness import (
    LIMIT,
    MemoryStore,
    Recorder,
    ShoutTool,
    answer,
    new_session,
    scripted,
)
from tests.storage.gates import held_back
from tests.storage.test_storage_log_sink_open import descriptors_of

SID = "s-offloop"

#: A session's log for a turn with one tool round, streamed in pieces: the order it always had.
TURN_ORDER = [
    "session_start",
    "turn_started",
    "history_mutation",  # the user's prompt
    "user_message",
    "context_update",  # estimated
    "provider_request",
    "text_delta",
    "text_delta",
    "history_mutation",  # the reply calling Shout
    "provider_response",
    "context_update",  # exact
    "tool_call",
    "permission_decision",
    "history_mutation",  # Shout's result
    "tool_result",
    "context_update",
    "provider_request",
    "text_delta",
    "text_delta",
    "history_mutation",
    "provider_response",
    "context_update",
    "turn_completed",
]


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    cwd = tmp_path / "project"
    cwd.mkdir()
    return cwd


def _script() -> list[dict[str, Any]]:
    shout = {"name": "Shout", "arguments": {"text": "hi"}}
    return [
        {"text": "calling it", "chunks": 2, "toolCalls": [shout]},
        {"text": "all done", "chunks": 2},
    ]


def _payload_fsyncs(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, bool]]:
    """Every fsync of a file or folder of a session's sidecars from now on: (its path, whether
    it ran on the thread this test (and its trio loop) runs on)."""
    real = os.fsync
    loop_thread = threading.get_ident()
    seen: list[tuple[str, bool]] = []

    def fsync(fd: Any) -> None:
        path = os.readlink(f"/proc/self/fd/{fd}") if isinstance(fd, int) else str(fd)
        if ".payloads" in path:
            seen.append((path, threading.get_ident() == loop_thread))
        real(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    return seen


async def test_a_new_tool_set_is_stored_off_the_loop_and_the_log_reads_as_before(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fsyncs = _payload_fsyncs(monkeypatch)
    path = workspace.parent / f"{SID}.jsonl"
    session = new_session(
        workspace,
        scripted(_script()),
        tools=[ShoutTool()],
        permissions={"allow": ["Shout"]},
        logger=SessionLogger(SID, FileLogSink(path)),
        session_id=SID,
    )
    with trio.fail_after(LIMIT):
        assert await session.run("shout") == "all done"

    assert fsyncs, "the tool set's sidecar was stored"
    assert [path for path, on_loop in fsyncs if on_loop] == []
    entries = decode_log(FileLogSource(path))
    assert [entry.event for entry in entries] == TURN_ORDER
    tools = [e.data["request"]["tools"] for e in entries if e.event == "provider_request"]
    assert [[tool["name"] for tool in logged] for logged in tools] == [["Shout"], ["Shout"]]
    assert validate_log(FileLogSource(path)).complete


class _HeldSink(FileLogSink):
    """A log sink whose sidecar creation waits for `release` once it has begun (`entered`,
    set on the loop), so a test can log while a sidecar is being stored."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.entered = trio.Event()
        self.release = threading.Event()
        self.stored_on: list[bool] = []
        self._token = trio.lowlevel.current_trio_token()
        self._loop_thread = threading.get_ident()

    def put_payload(self, content: bytes, sha256: str) -> str:
        self.stored_on.append(threading.get_ident() == self._loop_thread)
        self._token.run_sync_soon(self.entered.set)
        # Bounded: with the sidecar stored on the loop (the fault this guards against) the
        # loop would wait here, and the provider below never gets to release it.
        self.release.wait(LIMIT / 4)
        return super().put_payload(content, sha256)


class _StreamsWhileStored:
    """A provider wrapper that streams its reply only once the request's sidecar is being
    stored, and lets that store finish just before it returns."""

    def __init__(self, inner: Recorder, sink: _HeldSink) -> None:
        self.inner = inner
        self.sink = sink
        self.name, self.kind, self.model = inner.name, inner.kind, inner.model
        self.context_window = inner.context_window

    async def complete(self, request: ModelRequest, observer: StreamObserver) -> ModelReply:
        if request.purpose == "turn" and not self.sink.entered.is_set():
            await self.sink.entered.wait()
        try:
            return await self.inner.complete(request, observer)
        finally:
            self.sink.release.set()

    async def aclose(self) -> None:
        await self.inner.aclose()


async def test_what_is_logged_while_the_sidecar_is_stored_waits_behind_its_line(
    workspace: Path,
) -> None:
    """The request's deltas (and whatever follows while the store is under way) come after
    the request's line in the log, never before it: its line is written first, once its
    sidecar is there."""
    path = workspace.parent / f"{SID}.jsonl"
    sink = _HeldSink(path)
    provider = _StreamsWhileStored(scripted(_script()), sink)
    session = new_session(
        workspace,
        provider,
        tools=[ShoutTool()],
        permissions={"allow": ["Shout"]},
        logger=SessionLogger(SID, sink),
        session_id=SID,
    )
    with trio.fail_after(LIMIT):
        assert await session.run("shout") == "all done"

    # Stored off the loop (the second request may store it again if it comes before the
    # first store made the file: exclusive creation, its line waiting behind the first's).
    assert sink.stored_on
    assert not any(sink.stored_on)
    assert [entry.event for entry in decode_log(FileLogSource(path))] == TURN_ORDER
    assert validate_log(FileLogSource(path)).complete


async def test_a_loaded_history_over_the_spill_limit_is_stored_off_the_loop(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A session loaded with a long history logs it whole (a ``replace``) when it starts; a
    history over the spill limit goes to a sidecar, stored on a worker thread, and the lines
    logged after it (the turn's) come after it."""
    fsyncs = _payload_fsyncs(monkeypatch)
    path = workspace.parent / f"{SID}.jsonl"
    history = [Message.user("a long prompt " * 6_000), Message.assistant("read it")]
    session = new_session(
        workspace,
        scripted([{"text": "again"}]),
        logger=SessionLogger(SID, FileLogSink(path)),
        session_id=SID,
        history=history,
        source="resume",
    )
    with trio.fail_after(LIMIT):
        assert await session.run("more") == "again"

    assert fsyncs, "the history went to a sidecar"
    assert [path for path, on_loop in fsyncs if on_loop] == []
    entries = decode_log(FileLogSource(path))
    assert [entry.event for entry in entries[:3]] == [
        "session_start",
        "history_mutation",
        "turn_started",
    ]
    assert entries[1].data["messages"][0]["content"] == history[0].content
    assert validate_log(FileLogSource(path)).complete


#: A tool result over the spill limit: its lines name a sidecar of it.
BIG = 70_000
assert BIG > DEFAULT_SPILL_LIMIT


class _HeldBigSink(FileLogSink):
    """A log sink whose sidecars over the spill limit wait for `release` once their store
    has begun (`entered`, set through the loop while the store waits): a test proves the
    loop answers meanwhile by letting it go from a task of its own. Each such store notes
    whether it ran on the loop's thread (`on_loop`) and whether it was let go while it
    waited (`let_go`: never, when the loop itself was the one waiting)."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.entered = trio.Event()
        self.release = threading.Event()
        self.on_loop: list[bool] = []
        self.let_go: list[bool] = []
        self._token = trio.lowlevel.current_trio_token()
        self._loop_thread = threading.get_ident()

    def put_payload(self, content: bytes, sha256: str) -> str:
        if len(content) > DEFAULT_SPILL_LIMIT:
            self.on_loop.append(threading.get_ident() == self._loop_thread)
            self._token.run_sync_soon(self.entered.set)
            # Bounded: stored on the loop (the fault this guards against), nothing else runs
            # to let it go, and the store goes on unreleased after this.
            self.let_go.append(self.release.wait(LIMIT / 4))
        return super().put_payload(content, sha256)


def _shouting(
    workspace: Path, provider: Any, shout: ShoutTool, sink: FileLogSink, store: Any, **more: Any
) -> Session:
    """Session `SID` over `provider`, with `shout` allowed, logging to `sink`, saving to
    `store`; `more` as `new_session` takes it."""
    return new_session(
        workspace,
        provider,
        tools=[shout],
        permissions={"allow": ["Shout"]},
        logger=SessionLogger(SID, sink),
        session_id=SID,
        store=store,
        **more,
    )


def _events(path: Path) -> list[str]:
    """The events of the lines written to `path` so far."""
    if not path.exists():
        return []
    return [msgspec.json.decode(line)["event"] for line in path.read_bytes().splitlines()]


async def test_a_tool_result_over_the_spill_limit_is_stored_off_the_loop(
    workspace: Path,
) -> None:
    """A 70,000-character tool result: its ``history_mutation`` and ``tool_result`` lines
    name a sidecar of it, which was created on the event loop (two fsyncs, every other
    session waiting). Now it is stored on a worker thread: while the store is held, another
    task on the loop runs (and lets it go), and the log reads exactly as before, the lines
    logged meanwhile behind the result's."""
    path = workspace.parent / f"{SID}.jsonl"
    sink = _HeldBigSink(path)
    session = new_session(
        workspace,
        scripted(_script()),
        tools=[ShoutTool(size=BIG)],
        permissions={"allow": ["Shout"]},
        logger=SessionLogger(SID, sink),
        session_id=SID,
    )
    answered: list[list[str]] = []

    async def another_task() -> None:
        await sink.entered.wait()
        answered.append(_events(path))  # the loop runs it while the sidecar is stored
        sink.release.set()

    with trio.fail_after(LIMIT):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(another_task)
            assert await session.run("shout") == "all done"

    assert sink.on_loop
    assert not any(sink.on_loop)
    assert sink.let_go[0], "the loop did not run another task while the sidecar was stored"
    # What the loop saw then: the lines before the result's; the result's waited for it.
    assert answered == [TURN_ORDER[: TURN_ORDER.index("tool_result") - 1]]
    entries = decode_log(FileLogSource(path))
    assert [entry.event for entry in entries] == TURN_ORDER
    (result,) = [e.data["content"] for e in entries if e.event == "tool_result"]
    assert result == "HI" * (BIG // 2)
    assert validate_log(FileLogSource(path)).complete


async def test_a_small_line_logged_behind_a_big_one_is_written_after_it(
    workspace: Path,
) -> None:
    """A line logged while a line before it waits for its sidecar waits behind it: nothing
    is written until the sidecar is stored (on a worker thread, the loop free meanwhile),
    then both, in the order they were logged; `written` returns once they are."""
    path = workspace.parent / f"{SID}.jsonl"
    sink = _HeldBigSink(path)
    reporter = SessionReporter(SID, SessionLogger(SID, sink), None)
    content = "z" * BIG
    reporter.tool_result("call-1", "Shout", True, content)
    reporter.log("turn_completed", log_events.TurnCompletedEntry(turn_id="t-1", status="completed"))
    assert _events(path) == []  # the big line waits for its sidecar, the small one behind it

    with trio.fail_after(LIMIT):
        await sink.entered.wait()  # set through the loop while the store waits on its thread

    def still_waiting() -> None:
        assert _events(path) == []

    await held_back(sink.release, reporter.written, still_waiting)
    assert _events(path) == ["tool_result", "turn_completed"]
    assert sink.on_loop == [False]
    entries = decode_log(FileLogSource(path))
    assert entries[0].data["content"] == content


async def test_turn_finished_goes_out_once_the_turns_lines_are_written(workspace: Path) -> None:
    """A turn whose result's sidecar is still being stored when the turn is over (saved, its
    last line logged) announces ``turn_finished`` only once that store has ended and every
    line of the turn is written: a client that hears the turn ended reads all of it. (A
    first turn stores the tool set, so that nothing of the second waits for its store.)"""
    path = workspace.parent / f"{SID}.jsonl"
    sink = _HeldBigSink(path)
    store = MemoryStore()
    saved = trio.Event()
    store.on_save = lambda snapshot: saved.set() if snapshot.turn_count == 2 else None
    heard: list[list[str]] = []

    def events(event: wire.SessionEvent) -> None:
        if isinstance(event, wire.TurnFinished):
            heard.append(_events(path))

    shout = ShoutTool()
    session = _shouting(workspace, scripted(_script() * 2), shout, sink, store, event_sink=events)
    with trio.fail_after(LIMIT):
        assert await session.run("shout") == "all done"
        first = _events(path)
        assert heard == [first]
        shout.size = BIG
        async with trio.open_nursery() as nursery:
            nursery.start_soon(session.run, "shout")
            await saved.wait()  # the turn is saved: only its turn_finished is left
            print("DBG0", trio.current_time(), _events(path), session._claim._holder, sink.let_go)
            await trio.testing.wait_all_tasks_blocked()
            assert heard == [first]  # it waits for the result's lines, held with their sidecar
            before_result = TURN_ORDER[1 : TURN_ORDER.index("tool_result") - 1]
            assert _events(path) == first + before_result
            sink.release.set()
    assert heard == [first, first + TURN_ORDER[1:]]
    assert _events(path) == heard[-1]


async def test_a_shutdown_returns_once_the_sessions_lines_are_written(workspace: Path) -> None:
    """A line still waiting for its sidecar when the session shuts down (a message over the
    spill limit injected just before) is written, and ``session_end`` after it, before the
    shutdown returns: the log is whole once the session is gone."""
    path = workspace.parent / f"{SID}.jsonl"
    sink = _HeldBigSink(path)
    session = new_session(
        workspace, scripted(), logger=SessionLogger(SID, sink), session_id=SID, store=MemoryStore()
    )
    with trio.fail_after(LIMIT):
        await session.start()
        session.inject_message(Message.user("w" * BIG))
        await sink.entered.wait()

    def unwritten() -> None:
        assert _events(path) == ["session_start"]

    await held_back(sink.release, session.shutdown, unwritten)
    assert _events(path) == ["session_start", "history_mutation", "session_end"]
    assert not sink.is_open


async def _journaled_not_saved(workspace: Path) -> tuple[MemoryStore, list[Any], MemoryJournal]:
    """A turn whose big result the journal holds and the record lacks (the disk filled as it
    was saved): the store (still refusing), the history it last saved, the journal."""
    shout = {"name": "Shout", "arguments": {"text": "hi"}}
    store = MemoryStore()
    session = new_session(
        workspace,
        scripted([{"toolCalls": [shout]}, {"text": "shouted"}]),
        tools=[ShoutTool(size=BIG)],
        store=store,
        session_id=SID,
    )
    journal = MemoryJournal()
    with trio.fail_after(LIMIT):
        waiting = await session.run_recoverable("shout", journal)
        assert isinstance(waiting, TurnWaiting)
        saved = store.last.messages
        store.fail = True  # the crash: the result is journaled, never saved
        with pytest.raises(StorageFailed):
            await session.resume_recoverable(
                waiting.execution_id, journal, [answer(waiting.requests[0].request_id, True)]
            )
    return store, saved, journal


def _loaded_again(
    workspace: Path, saved: list[Any], store: MemoryStore | None = None
) -> tuple[Session, _HeldBigSink, Path]:
    """The session loaded again from `saved`, its log's sidecar stores held back."""
    path = workspace.parent / f"{SID}.jsonl"
    sink = _HeldBigSink(path)
    stored = {} if store is None else {"store": store}
    again = new_session(
        workspace,
        scripted(),
        tools=[ShoutTool(size=BIG)],
        logger=SessionLogger(SID, sink),
        session_id=SID,
        history=saved,
        source="resume",
        **stored,
    )
    return again, sink, path


async def test_a_recovery_returns_once_what_it_put_back_is_in_the_log(workspace: Path) -> None:
    """A result over the spill limit that the journal holds and the record lacks is put back
    when the session is loaded again, its lines naming a sidecar stored on a worker thread.
    `recover` returns once they are written: what reads or appends to the log next (the
    daemon's ``recovered`` entry, written by a logger of its own) comes after them."""
    _, saved, journal = await _journaled_not_saved(workspace)
    again, sink, path = _loaded_again(workspace, saved)

    def unwritten() -> None:
        assert _events(path) == []

    await held_back(sink.release, lambda: again.recover(journal), unwritten)
    logged = decode_log(FileLogSource(path))
    assert [entry.event for entry in logged][:2] == ["history_mutation", "tool_result"]
    assert logged[1].data["content"] == "HI" * (BIG // 2)


async def test_a_recovery_that_fails_returns_once_what_it_put_back_is_in_the_log(
    workspace: Path,
) -> None:
    """The same put-back, the save after it failing (the disk still full): the recovery
    raises, and the session is not loaded. It raised at once, its lines still waiting for
    their sidecar: the daemon let the session go (or loaded it afresh, through a logger of
    its own) while the old logger still had lines to append. It raises once they are in."""
    store, saved, journal = await _journaled_not_saved(workspace)
    again, sink, path = _loaded_again(workspace, saved, store)  # the store still full

    async def recovering() -> None:
        with pytest.raises(StorageError):
            await again.recover(journal)

    def unwritten() -> None:
        assert _events(path) == []

    await held_back(sink.release, recovering, unwritten)
    logged = decode_log(FileLogSource(path))
    assert [entry.event for entry in logged][:2] == ["history_mutation", "tool_result"]


class _ClosedSource:
    """A tool source offering no tool, counting how often the session closes it."""

    def __init__(self) -> None:
        self.closed = 0

    async def tools(self) -> list[Any]:
        return []

    async def aclose(self) -> None:
        self.closed += 1

    def missing_reason(self, name: str) -> str | None:
        return None


class _RefusingBigSink(_HeldBigSink):
    """A `_HeldBigSink` whose held sidecar store then fails, as on a full disk."""

    def put_payload(self, content: bytes, sha256: str) -> str:
        if len(content) > DEFAULT_SPILL_LIMIT:
            self._token.run_sync_soon(self.entered.set)
            self.let_go.append(self.release.wait(LIMIT / 4))
            raise StorageError(f"logs/{SID}.payloads/{sha256}", "no space left on device")
        return super().put_payload(content, sha256)


@pytest.mark.parametrize("stored", [True, False], ids=["stored", "refused"])
async def test_a_shutdown_cut_short_in_its_drain_lets_go_and_its_lines_still_come_out(
    workspace: Path, caplog: pytest.LogCaptureFixture, stored: bool
) -> None:
    """The daemon's deadline cancels a shutdown while it waits for the claim: a turn holds
    it, waiting for its result's lines (held with their sidecar's store). The shutdown logs
    no ``session_end`` — the turn still runs, its log is cut off and says so — yet the lines
    logged before it come out once the store ends (written, or dropped and reported), and
    only then is the log's file closed (`SessionLogger.close`). What the session holds is
    let go at the cut, once: the provider and the added tools stayed open. (A first turn
    stores the tool set, so that nothing of the second waits for its store.)"""
    path = workspace.parent / f"{SID}.jsonl"
    sink = _HeldBigSink(path) if stored else _RefusingBigSink(path)
    provider = scripted(_script() * 2)
    source = _ClosedSource()
    store = MemoryStore()
    saved = trio.Event()
    store.on_save = lambda snapshot: saved.set() if snapshot.turn_count == 2 else None
    shout = ShoutTool()
    session = _shouting(workspace, provider, shout, sink, store, tool_source=source)

    async def cut_short(deadline: trio.CancelScope) -> None:
        with deadline:
            await session.shutdown()

    with trio.fail_after(LIMIT):
        assert await session.run("shout") == "all done"
        first = _events(path)
        shout.size = BIG
        async with trio.open_nursery() as nursery:
            nursery.start_soon(session.run, "shout")
            await saved.wait()  # the turn is saved: only its turn_finished is left
            await trio.testing.wait_all_tasks_blocked()  # it waits for the held lines
            deadline = trio.CancelScope()
            nursery.start_soon(cut_short, deadline)
            await trio.testing.wait_all_tasks_blocked()
            assert session.is_running()
            deadline.cancel()
            await trio.testing.wait_all_tasks_blocked()
            held = _events(path)
            let_go = (provider.closed, source.closed)
            sink.release.set()
        await session.shutdown()  # returns at once: it is over
    # Held until the test let them go: the result's store, and the second line's, which
    # stores it again after it (decision 77).
    assert sink.let_go == [True, True]
    assert held == first + TURN_ORDER[1 : TURN_ORDER.index("tool_result") - 1]
    assert let_go == (1, 1)
    assert (provider.closed, source.closed) == (1, 1)
    second = TURN_ORDER[1:]
    if not stored:  # the two lines naming the sidecar dropped, and reported
        second = [e for i, e in enumerate(second, start=1) if i not in (13, 14)]
        assert "cannot be appended" in caplog.text
    assert _events(path) == first + second  # all of the turn, and no session_end
    assert not sink.is_open
    assert descriptors_of(path) == 0
